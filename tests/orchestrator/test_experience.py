"""The experience pool lives with the runs, never in the project's source tree."""
import subprocess
import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "fakes"))
from runlogs import FAKES  # noqa: E402

from orchestrator import experience, ledger  # noqa: E402
from orchestrator.experiment import StartOptions, run_experiment  # noqa: E402
from orchestrator.paths import project_root  # noqa: E402


def _status() -> str:
    return subprocess.run(["git", "-C", str(project_root()), "status", "--porcelain"],
                          capture_output=True, text=True, check=True).stdout


def test_the_pool_is_in_the_runs_folder_unless_a_folder_is_named(tmp_path, monkeypatch):
    monkeypatch.delenv("EAU_EXPERIENCE_DIR", raising=False)
    monkeypatch.delenv("EAU_RUNS_DIR", raising=False)
    monkeypatch.chdir(tmp_path)
    assert experience.pool_dir() == tmp_path / "runs" / "_experience"
    assert experience.pool_dir(runs_root=tmp_path / "elsewhere") == tmp_path / "elsewhere" / "_experience"
    monkeypatch.setenv("EAU_EXPERIENCE_DIR", str(tmp_path / "mine"))
    assert experience.pool_dir(runs_root=tmp_path / "elsewhere") == tmp_path / "mine"


def test_an_experiment_files_its_findings_beside_its_runs(tmp_path, monkeypatch):
    """The built-in agent's findings of a whole experiment (the deadlock it repairs, measured)
    go to the runs folder's pool; the project's checkout is left as it was."""
    monkeypatch.setenv("PYTHONPATH", str(FAKES))
    monkeypatch.delenv("EAU_EXPERIENCE_DIR", raising=False)
    monkeypatch.setenv("FAKE_TRAINER_STEP_S", "0.25")
    before = _status()
    exp, final = run_experiment("dl", StartOptions(
        bench="colbench", agent="builtin", every=5, preset="cpu", steps=40, window=5,
        trainer="fake_trainer", poll_s=0.1, max_lag=1, overrides={"trainer.save_freq": 5}),
        tmp_path)
    assert final == "finished" and ledger.read_lines(exp.dir, "effect")
    found = sorted((tmp_path / "_experience").glob("colbench-*.md"))
    assert found and "experiment\": \"dl\"" in found[0].read_text()
    assert _status() == before
