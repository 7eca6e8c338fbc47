"""Plugins written before the core was grouped into packages keep working (issue 33).

The public modules moved (calibrate.base -> calibrate.contract.base, ...); calibrate.FORMER_NAMES maps
each former name to its module, and importing a former name gives that very module object.
tests/former_names.json lists every public top-level name each former module defined before the move
(read from its source at 580351c); each must still be importable from the former name.
tests/former_api_quantile_shift.py is the example plugin's estimator as it was written then.
"""

from __future__ import annotations

import importlib
import json
import subprocess
import sys
from pathlib import Path

import pytest

import calibrate
from calibrate.testing import parametrize_with_checks

from former_api_quantile_shift import QuantileShift

FORMER = json.loads((Path(__file__).with_name("former_names.json")).read_text(encoding="utf-8"))
#: names a former module defined that were never API: the type variables of base.py's decorators
NOT_API = {"calibrate.base": {"F", "T"}}


def _fresh(code: str) -> str:
    """What ``code`` prints in a fresh interpreter (stripped), which must exit 0."""
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=120)
    assert out.returncode == 0, out.stderr
    return out.stdout.strip()


def test_every_former_public_module_has_a_former_name():
    assert sorted(FORMER) == sorted(calibrate.FORMER_NAMES)
    assert set(calibrate.FORMER_NAMES.values()) <= set(calibrate.PUBLIC_MODULES)


@pytest.mark.parametrize("former", sorted(FORMER))
def test_a_former_name_is_the_module_and_has_its_names(former):
    module = importlib.import_module(former)
    assert module is importlib.import_module(calibrate.FORMER_NAMES[former])
    missing = [name for name in FORMER[former] if not hasattr(module, name) and name not in NOT_API.get(former, ())]
    assert not missing, f"{former} no longer has {missing}"


def test_former_names_work_in_a_fresh_interpreter():
    """``from calibrate.stats import ...`` as a plugin's first line, before anything imported calibrate."""
    code = ("from calibrate.stats import interp_threshold\nfrom calibrate.base import Estimator\n"
            "import calibrate.types as t, calibrate.contract.types as ct, pickle\n"
            "import calibrate.contract.base as cb\nassert t is ct and Estimator is cb.Estimator\n"
            "print(interp_threshold.__module__)")
    assert _fresh(code) == "calibrate.statistics.order"


def test_a_former_name_is_an_attribute_of_the_package():
    """Before the move, importing a public module made it (and the public modules it imported) attributes of the
    package: ``import calibrate.base`` then ``calibrate.types.DistanceMatrix`` worked, as did ``from calibrate import
    base``. The former names are still attributes, each the very module; an unknown one is not."""
    code = ("import calibrate.base\nimport calibrate.contract.types as ct\nassert calibrate.types is ct\n"
            "import calibrate.testing\nfrom calibrate import hookspecs, stats\n"
            "assert calibrate.hookspecs is hookspecs and stats.interp_threshold\n"
            "assert calibrate.base.Estimator is calibrate.contract.base.Estimator\n"
            "assert not hasattr(calibrate, 'pipeline') and not hasattr(calibrate, 'no_such_module')\nprint('ok')")
    assert _fresh(code) == "ok"


def test_a_former_name_is_found_while_the_package_is_still_being_imported():
    """From the moment calibrate is in sys.modules, an import of ``calibrate.stats`` in another thread does not wait
    for calibrate/__init__.py to finish: the finder of former names must be in place before that module imports
    anything (it was installed at its end, and threads importing former names at once failed with
    ModuleNotFoundError). Made deterministic here: the first import calibrate/__init__.py makes asks for a former
    name, as such a thread would at that moment."""
    code = ("import importlib, sys\n"
            "class Meanwhile:\n"
            "    def find_spec(self, name, path=None, target=None):\n"
            "        if name.startswith('calibrate.') and 'calibrate' in sys.modules and not hasattr(self, 'got'):\n"
            "            self.got = None\n"
            "            self.got = importlib.import_module('calibrate.stats')\n"
            "        return None\n"
            "sys.meta_path.insert(0, Meanwhile())\n"
            "import calibrate\n"
            "print(sys.meta_path[0].got.__name__)")
    assert _fresh(code) == "calibrate.statistics.order"


def test_reloading_the_package_keeps_one_finder():
    code = ("import importlib, sys, calibrate\nimportlib.reload(calibrate)\nimport calibrate.base as b\n"
            "print(sum(type(f).__name__ == '_FormerNames' for f in sys.meta_path), b.__name__)")
    assert _fresh(code).split() == ["1", "calibrate.contract.base"]


def test_an_unknown_module_is_still_not_found():
    with pytest.raises(ModuleNotFoundError):
        importlib.import_module("calibrate.no_such_module")


@parametrize_with_checks([("estimator", QuantileShift, {"weight": 0.5})])
def test_a_plugin_written_before_the_move_passes_the_kit(component, check, tmp_path):
    check(component, tmp_path)
