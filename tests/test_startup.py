"""Start-up stays light: listing the plugins and validating a recipe import no scipy.stats,
scipy.special, scipy.spatial or matplotlib (they cost most of a second; the components import them
inside the functions that compute). An import-graph check, in a fresh interpreter, not a timing."""

from __future__ import annotations

import importlib.util
import json
import os
import subprocess
import sys
from pathlib import Path

QUICKSTART = Path(__file__).resolve().parent.parent / "examples" / "quickstart.yaml"
HEAVY = ("scipy.stats", "scipy.special", "scipy.spatial", "matplotlib")


def _loaded_after(code: str) -> list[str]:
    """Run ``code`` in a fresh interpreter (built-in plugins only) and return which HEAVY modules it loaded."""
    probe = f"{code}\nimport json, sys\nprint(json.dumps([m for m in {HEAVY!r} if m in sys.modules]))"
    env = {**os.environ, "CALIBRATE_DISABLE_PLUGIN_AUTOLOAD": "1"}
    proc = subprocess.run([sys.executable, "-c", probe], capture_output=True, text=True, env=env, timeout=120)
    assert proc.returncode == 0, proc.stderr
    return json.loads(proc.stdout.strip().splitlines()[-1])


def test_registry_and_validate_import_no_scipy_stats_special_or_matplotlib():
    code = ("from calibrate.contract.manager import build_registry\n"
            "from calibrate.api import validate\n"
            "assert len(build_registry().all()) > 10\n"
            f"validate({str(QUICKSTART)!r})\n")
    assert _loaded_after(code) == []


def test_cli_plugins_and_validate_import_none_of_them_either():
    code = ("from calibrate.cli.commands import app\n"
            "for argv in (['plugins'], ['validate', " + repr(str(QUICKSTART)) + "]):\n"
            "    try:\n"
            "        app(argv)\n"
            "    except SystemExit as exc:\n"
            "        assert exc.code in (0, None), exc.code\n")
    assert _loaded_after(code) == []


def test_the_package_and_its_hook_specifications_import_nothing_heavy():
    """What every plugin imports first: no pipeline, no numpy, no scipy (issue 21, item 6); the entry
    points (calibrate.fit, calibrate.load, ...) are imported on first use."""
    for code in ("import calibrate.contract.hookspecs", "import calibrate", "from calibrate.contract.hookspecs import hookimpl"):
        probe = (f"{code}\nimport json, sys\n"
                 "print(json.dumps([m for m in ('numpy', 'scipy', 'calibrate.running.pipeline', 'calibrate.api') "
                 "if m in sys.modules]))")
        proc = subprocess.run([sys.executable, "-c", probe], capture_output=True, text=True, timeout=120)
        assert proc.returncode == 0, proc.stderr
        assert json.loads(proc.stdout.strip().splitlines()[-1]) == [], code
    proc = subprocess.run([sys.executable, "-c", "import calibrate; print(calibrate.fit.__module__, "
                           "calibrate.load.__module__, 'fit' in dir(calibrate))"], capture_output=True, text=True, timeout=120)
    assert proc.stdout.split() == ["calibrate.saved.fitting", "calibrate.api", "True"], proc.stderr


def test_saving_a_calibration_without_long_float_lists_imports_no_pyarrow():
    """pyarrow formats long float lists (auto's pooled scores); a state without one does not import it (80 ms)."""
    code = ("import json, sys\n"
            "from calibrate.saved.json_format import FAST_FLOATS, dumps_artifact\n"
            "small = {'classes': ['a', 'b'], 'sigma': [0.5, 1.25], 'nested': {'x': (1.0, 2.0)}}\n"
            "text = dumps_artifact(small)\n"
            "assert text.startswith(json.dumps(small, separators=(',', ':'))[:-1])\n"
            "loaded = 'pyarrow' in sys.modules\n"
            "dumps_artifact({'pooled': [0.5] * FAST_FLOATS})\n"
            "print(json.dumps([loaded, 'pyarrow' in sys.modules]))")
    proc = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=120)
    assert proc.returncode == 0, proc.stderr
    loaded = json.loads(proc.stdout.strip().splitlines()[-1])
    assert loaded[0] is False
    assert loaded[1] is (importlib.util.find_spec("pyarrow") is not None)  # where installed, the long list uses it
