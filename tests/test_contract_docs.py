"""The plugin contract lives in code (calibrate.contract.base, calibrate.contract.sharded.PartitionedFitter) and
docs/plugins.md's tables are generated from it (issue 21, item 3): they must be current, every member
of a contract class must be classified, and every optional member must say what its default does. Its
hand-written lists must name what the code holds (issue 33): every field of the data types a plugin reads and
builds, and the modules of calibrate.PUBLIC_MODULES."""

from __future__ import annotations

from abc import abstractmethod
from dataclasses import dataclass
from pathlib import Path

import pytest

from calibrate.contract.base import Component, Transform, optional
from calibrate.testing import contract, contract_docs

DOC = Path(__file__).resolve().parents[1] / "docs" / "plugins.md"


def test_the_generated_tables_in_docs_plugins_md_are_current():
    text = DOC.read_text(encoding="utf-8")
    assert contract_docs.updated(text) == text, \
        "docs/plugins.md is stale: run python -m calibrate.testing.contract_docs --write docs/plugins.md"


def test_a_changed_declaration_makes_the_docs_stale(monkeypatch):
    text = DOC.read_text(encoding="utf-8")
    monkeypatch.setattr(Transform.fitted_state, "__doc__", "Called sometimes. Default: something else.")
    assert contract_docs.updated(text) != text
    assert "Called sometimes." in contract_docs.tables_markdown()


def test_check_exits_1_on_a_stale_file_and_write_mends_it(tmp_path, capsys):
    stale = tmp_path / "plugins.md"
    stale.write_text(DOC.read_text(encoding="utf-8").replace("| optional |", "| required |", 1), encoding="utf-8")
    assert contract_docs.main([str(stale), "--check"]) == 1
    assert "stale" in capsys.readouterr().err
    assert contract_docs.main([str(stale), "--write"]) == 0
    assert contract_docs.main([str(stale), "--check"]) == 0
    assert stale.read_text(encoding="utf-8") == DOC.read_text(encoding="utf-8")


@pytest.mark.parametrize("title, cls, reached", contract.contract_classes(), ids=lambda v: getattr(v, "__name__", None))
def test_every_member_is_declared_with_what_it_does(title, cls, reached):
    found = contract.members(cls)  # raises for a method that is neither required, optional nor provided
    for m in found:
        if m.role == "provided":
            continue
        assert len(m.doc) > 30, f"{cls.__name__}.{m.name}: say when the core uses it and what it must give"
        if m.role == "optional":
            assert m.default, f"{cls.__name__}.{m.name}: an optional member ends its text with 'Default: ...'"


def test_the_optional_methods_the_issue_lists_are_declared():
    declared = set()
    for _, cls, _ in contract.contract_classes():
        declared |= {m.name for m in contract.members(cls) if m.role in ("optional", "required")}
    listed = {"partitioned", "enroll_mode", "_enroll", "order_statistic_pool", "order_statistic_thresholds",
              "fitted_state", "set_fitted_state", "_inverse", "out_of_range", "progress_name", "read_shard",
              "produces", "output_kind", "check", "simulate", "simulation_ranks", "depends_on_data", "accepts",
              "sharded", "default_distance", "offsets_matter", "shard_columns", "cdf", "parameters", "files",
              "missing", "__enter__", "__exit__"}
    assert listed <= declared, sorted(listed - declared)


def test_an_unclassified_method_on_a_base_class_is_refused():
    class NewKind(Component):
        """A base class written without the marks."""

        @abstractmethod
        def _work(self) -> None:
            """Called once."""

        def helper(self) -> int:
            return 1

    with pytest.raises(TypeError, match=r"NewKind.helper is not classified: mark it @abstractmethod"):
        contract.members(NewKind)

    class Marked(Component):
        #: what it takes. Default: both
        accepts: tuple = ()

        @abstractmethod
        def _work(self) -> None:
            """Called once per run, returns nothing."""

        @optional
        def hint(self) -> str:
            """Called when reporting. Default: empty."""
            return ""

    roles = {m.name: (m.role, m.default) for m in contract.members(Marked)}
    assert roles == {"accepts": ("optional", "both"), "_work": ("required", ""), "hint": ("optional", "empty.")}



def test_a_new_kind_gets_its_table_from_its_base_class_alone(monkeypatch):
    """A kind added to calibrate.contract.kinds.KINDS (e.g. the normaliser stage of issue 21, items 1-2) is tabled from
    its base class's declarations, with no change to the generator."""
    from calibrate.contract.kinds import KINDS, Kind

    class Normalizer(Component):
        """Scores normalised with cohort statistics."""

        @abstractmethod
        def _fit(self, cohort) -> None:
            """Called once per fold with the cohort scores: learn the enrolled side's statistics."""

        @optional
        def fitted_state(self) -> dict:
            """Called when a calibration is saved: the cohort statistics, JSON. Default: {}."""
            return {}

    monkeypatch.setattr(contract, "KINDS", KINDS + (Kind("normalizers", "normalizer", Normalizer, "cohort norms"),))
    text = contract_docs.tables_markdown()
    section = text[text.index("#### Normalizers"):]
    assert "Registered through `calibrate_register_normalizers`" in section
    assert "| `_fit(cohort)` | required | Called once per fold with the cohort scores" in section
    assert "| `fitted_state() -> dict` | optional | Called when a calibration is saved: the cohort statistics, JSON. | {}. |" \
        in section


# ---- the hand-written lists: the data types' fields, the modules a plugin may import (issue 33) ----------

def test_every_data_type_a_plugin_handles_is_documented_field_by_field():
    assert contract_docs.problems(DOC.read_text(encoding="utf-8")) == []


@dataclass(frozen=True)
class _Probe:
    first: int
    second: float = 0.0
    _cache: int = 0


def test_a_field_added_removed_or_misnamed_is_caught(monkeypatch):
    monkeypatch.setattr(contract_docs, "data_types", lambda: (_Probe,))
    where = f"{_Probe.__module__}.{_Probe.__qualname__}"
    table = "| field | type | meaning |\n|---|---|---|\n"
    doc = lambda rows: f"# x\n\n{contract_docs.DATA_SECTION}\n\n#### `{where}`\n\n{table}{rows}\n## Next\n"  # noqa: E731
    assert contract_docs.data_type_problems(doc("| `first` | int | a |\n| `second` | float | b |\n")) == []
    assert contract_docs.data_type_problems(doc("| `first` | int | a |\n")) == \
        [f"{where}.second is not in its table in {contract_docs.DATA_SECTION!r}"]
    assert contract_docs.data_type_problems(doc("| `first` | int | a |\n| `second` | f | b |\n| `third` | c | d |\n")) \
        == [f"{contract_docs.DATA_SECTION}: {where}'s table lists 'third', which is not one of its fields"]
    assert contract_docs.data_type_problems("# x\n")[0].startswith(f"{contract_docs.DATA_SECTION}: no table for {where}")
    moved = doc("").replace(where, "calibrate.nowhere._Probe")
    assert contract_docs.data_type_problems(moved)[0] == (f"{contract_docs.DATA_SECTION}: heading "
                                                          "'`calibrate.nowhere._Probe`' names no importable type "
                                                          "(`module.Name`)")


def test_the_import_list_is_calibrate_public_modules_read_at_test_time(monkeypatch, tmp_path, capsys):
    import calibrate

    text = DOC.read_text(encoding="utf-8")
    assert contract_docs.public_module_problems(text) == []
    first = calibrate.PUBLIC_MODULES[0]
    monkeypatch.setattr(calibrate, "PUBLIC_MODULES", calibrate.PUBLIC_MODULES[1:] + ("calibrate.contract",))
    assert contract_docs.public_module_problems(text) == [
        f"{contract_docs.IMPORT_SECTION}: calibrate.contract is in calibrate.PUBLIC_MODULES but not listed "
        "('* `calibrate.contract`: what it holds')",
        f"{contract_docs.IMPORT_SECTION}: lists {first}, which calibrate.PUBLIC_MODULES does not hold"]
    copy = tmp_path / "plugins.md"
    copy.write_text(text, encoding="utf-8")
    assert contract_docs.main([str(copy), "--check"]) == 1  # the command CI can run says so too
    assert "calibrate.contract is in calibrate.PUBLIC_MODULES but not listed" in capsys.readouterr().err


def test_enroll_hands_the_estimator_a_one_class_impostor_distances_as_documented():
    """docs/plugins.md (the Estimators table, `_enroll`): `single` is a one-class ImpostorDistances."""
    interp = pytest.importorskip("calibrate_builtins.estimators.interp")
    from calibrate.contract.types import ImpostorDistances

    seen = []

    class Recording(interp.ClassInterp):
        def _enroll(self, model, cls, single, context):
            seen.append(single)
            return super()._enroll(model, cls, single, context)

    est = Recording()
    model = est.fit(ImpostorDistances.from_lists({"a": [0.2, 0.5, 0.9], "b": [0.1, 0.4, 0.8]}))
    est.enroll(model, "c", [0.3, 0.6, 0.7])
    assert isinstance(seen[0], ImpostorDistances) and seen[0].classes == ("c",)
    assert seen[0].of(0).tolist() == [0.3, 0.6, 0.7]
