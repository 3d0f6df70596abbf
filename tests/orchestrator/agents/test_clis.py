"""Where the pinned agent CLIs are installed and looked for: the machine's cache folder, never
the project's source tree (808 MB of CLIs once landed in the checkout's .agent-clis/)."""
import subprocess
from pathlib import Path

from orchestrator.agents import clis
from orchestrator.paths import project_root

FAKE_NPM = """#!/bin/sh
# records its arguments, then installs stand-in `claude` and `codex` under --prefix
echo "$@" > "$NPM_ARGS"
prefix=$3
mkdir -p "$prefix/node_modules/.bin"
for exe in claude codex; do
    printf '#!/bin/sh\\necho 1.2.3\\n' > "$prefix/node_modules/.bin/$exe"
    chmod +x "$prefix/node_modules/.bin/$exe"
done
"""


def test_the_install_and_the_lookup_use_the_cache_folder(tmp_path, monkeypatch):
    bin_dir = tmp_path / "bin"
    bin_dir.mkdir()
    (bin_dir / "npm").write_text(FAKE_NPM)
    (bin_dir / "npm").chmod(0o755)
    env = {"PATH": f"{bin_dir}:/usr/bin:/bin", "HOME": str(tmp_path / "home"),
           "XDG_CACHE_HOME": str(tmp_path / "xdg"), "NPM_ARGS": str(tmp_path / "args")}
    out = subprocess.run(["bash", str(project_root() / "scripts" / "install_agent_clis.sh")],
                         env=env, capture_output=True, text=True, timeout=60)
    assert out.returncode == 0, out.stderr
    installed = tmp_path / "xdg" / "eau" / "agent-clis"
    assert (tmp_path / "args").read_text().split()[:3] == ["install", "--prefix", str(installed)]
    for key in ("EAU_AGENT_CLIS", "EAU_CACHE"):
        monkeypatch.delenv(key, raising=False)
    monkeypatch.setenv("XDG_CACHE_HOME", str(tmp_path / "xdg"))
    monkeypatch.setenv("PATH", "/usr/bin:/bin")
    assert clis.prefix() == installed
    assert clis.find("claude-code") == str(installed / "node_modules" / ".bin" / "claude")
    monkeypatch.delenv("XDG_CACHE_HOME")
    monkeypatch.setenv("HOME", str(tmp_path / "home"))
    assert clis.prefix() == tmp_path / "home" / ".cache" / "eau" / "agent-clis"
    assert not str(clis.prefix()).startswith(str(project_root()))
    monkeypatch.setenv("EAU_CACHE", str(tmp_path / "c"))
    assert clis.prefix() == Path(tmp_path / "c" / "agent-clis")
