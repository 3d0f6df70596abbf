"""Where `--model` / model.path finds a model (training.policy.resolve_model_path): a local
folder, the packaged default, or a Hugging Face hub id ("Qwen/Qwen3-4B") fetched when online and
read from the hub's cache offline. What a user depends on: offline, an id that is not cached ends
in one sentence saying what to give instead (a local folder), never a traceback or a hang; a
cached id loads with no network; online, the id is downloaded once, weights as safetensors."""
from __future__ import annotations

import shutil
from pathlib import Path

import pytest

from training.policy import HUB_PATTERNS, ModelLoadError, resolve_model_path


@pytest.fixture
def empty_hub(monkeypatch, tmp_path) -> Path:
    """An empty hub cache, offline (HF_HUB_OFFLINE=1), so no test reaches the network or a
    model someone cached on this machine."""
    from huggingface_hub import constants

    cache = tmp_path / "hub"
    cache.mkdir()
    monkeypatch.setattr(constants, "HF_HUB_CACHE", str(cache))
    monkeypatch.setenv("HF_HUB_OFFLINE", "1")
    return cache


def _one_sentence(exc: pytest.ExceptionInfo) -> str:
    text = str(exc.value)
    assert "\n" not in text and text.endswith(".") and len(text) < 400, text
    return text


def test_an_uncached_hub_id_offline_is_one_sentence_asking_for_a_folder(empty_hub):
    with pytest.raises(ModelLoadError) as exc:
        resolve_model_path("Qwen/Qwen3-4B")
    text = _one_sentence(exc)
    assert "'Qwen/Qwen3-4B' could not be fetched from the Hugging Face hub" in text
    assert "HF_HUB_OFFLINE is set" in text and "local folder holding its config.json" in text


def test_a_cached_hub_id_loads_offline_from_the_cache(empty_hub, tiny_model_dir):
    """The hub cache's layout (models--OWNER--NAME/refs/main naming a snapshot folder): the id
    resolves to that folder with no network."""
    repo = empty_hub / "models--someone--tiny"
    sha = "0" * 40
    (repo / "refs").mkdir(parents=True)
    (repo / "refs" / "main").write_text(sha)
    shutil.copytree(tiny_model_dir, repo / "snapshots" / sha)
    folder = resolve_model_path("someone/tiny")
    assert Path(folder) == repo / "snapshots" / sha
    from training.policy import load_tokenizer
    assert load_tokenizer(folder).eos_token is not None


def test_online_the_id_is_fetched_with_weights_as_safetensors(monkeypatch, tmp_path,
                                                              tiny_model_dir):
    import huggingface_hub

    monkeypatch.delenv("HF_HUB_OFFLINE", raising=False)
    monkeypatch.setattr(huggingface_hub.constants, "HF_HUB_OFFLINE", False)
    asked = {}

    def download(repo_id, **kw):
        asked.update(kw, repo_id=repo_id)
        return str(tiny_model_dir)

    monkeypatch.setattr(huggingface_hub, "snapshot_download", download)
    assert resolve_model_path("Qwen/Qwen3-4B") == str(tiny_model_dir)
    assert asked == {"repo_id": "Qwen/Qwen3-4B", "allow_patterns": HUB_PATTERNS,
                     "local_files_only": False}
    assert "*.safetensors" in HUB_PATTERNS and not any("bin" in p for p in HUB_PATTERNS)
    bare = tmp_path / "bare"                        # a repository with no safetensors
    bare.mkdir()
    (bare / "config.json").write_text("{}")
    monkeypatch.setattr(huggingface_hub, "snapshot_download", lambda repo_id, **kw: str(bare))
    with pytest.raises(ModelLoadError, match="has no safetensors weights"):
        resolve_model_path("old/bin-only")


def test_an_unknown_id_and_a_missing_folder_are_one_sentence(monkeypatch, empty_hub, tmp_path):
    import huggingface_hub
    from huggingface_hub.errors import RepositoryNotFoundError

    with pytest.raises(ModelLoadError) as exc:
        resolve_model_path(str(tmp_path / "no-such-folder"))
    assert "there is no model folder at" in _one_sentence(exc)
    with pytest.raises(ModelLoadError) as exc:
        resolve_model_path("not a hub id!")
    assert "neither a model folder here nor a Hugging Face hub id" in _one_sentence(exc)

    def not_found(repo_id, **kw):   # what the hub answers online for an id it does not hold
        err = RepositoryNotFoundError.__new__(RepositoryNotFoundError)
        Exception.__init__(err, "404 Client Error: Repository Not Found")
        raise err

    monkeypatch.setattr(huggingface_hub, "snapshot_download", not_found)
    with pytest.raises(ModelLoadError) as exc:
        resolve_model_path("nobody/no-such-model-xyz")
    assert "the Hugging Face hub has no model 'nobody/no-such-model-xyz'" in _one_sentence(exc)


def test_warmstart_cli_reports_an_uncached_id_offline_in_one_line(empty_hub, tmp_path, capsys):
    """`orchestrator warmstart --model ID` runs this entry point: its stderr is the sentence."""
    from training.warmstart import main

    assert main(["--bench", "usergym", "--out", str(tmp_path / "o"), "--model",
                 "Qwen/Qwen3-4B"]) == 2
    err = capsys.readouterr().err.strip()
    assert len(err.splitlines()) == 1 and "could not be fetched from the Hugging Face hub" in err
