"""llama.cpp's prefill of given prompts, in a process of its own, for
`ragdoll bench product_ttft`.

`python -m bench.product_ttft_llama GGUF THREADS N_CTX` loads the GGUF once (before any
timing) through bench/offload_llama.py's LlamaRunner and says `READY {json}` with the
load time; then for each line of prompt ids (JSON) on its input it prefills them in a
fresh context, so that no prompt's KV serves the next, and answers `PREFILL {json}` with
the seconds. The parent keeps it alive beside the engine so that each question's two
sides are timed a moment apart, under the same load of a shared machine."""

from __future__ import annotations

import json
import subprocess
import sys
import time
from pathlib import Path
from typing import IO, Any

from bench import peer_env


class LlamaPrefiller:
    """The child, as a context manager: `prefill(ids)` → llama.cpp's prefill seconds."""

    def __init__(self, *, gguf: Path, threads: int, n_ctx: int) -> None:
        self._argv = [
            sys.executable,
            "-m",
            "bench.product_ttft_llama",
            str(gguf),
            str(threads),
            str(n_ctx),
        ]
        self._child: subprocess.Popen[str] | None = None
        self.load_s: float | None = None

    def __enter__(self) -> LlamaPrefiller:
        self._child = subprocess.Popen(
            self._argv,
            stdin=subprocess.PIPE,
            stdout=subprocess.PIPE,
            text=True,
            env=peer_env(),
        )
        self.load_s = float(self._reply("READY")["load_s"])
        return self

    def __exit__(self, *exc: object) -> None:
        child = self._child
        if child is None:
            return
        if child.stdin is not None:
            child.stdin.close()  # its loop ends at the end of its input
        try:
            child.wait(timeout=30)
        except subprocess.TimeoutExpired:
            child.kill()
            child.wait()

    def prefill(self, ids: list[int]) -> tuple[float, float]:
        """(prefill seconds, CPU seconds the child spent meanwhile)."""
        assert self._child is not None and self._child.stdin is not None
        self._child.stdin.write(json.dumps(ids) + "\n")
        self._child.stdin.flush()
        reply = self._reply("PREFILL")
        return float(reply["prefill_s"]), float(reply["cpu_s"])

    def _reply(self, tag: str) -> dict[str, Any]:
        assert self._child is not None and self._child.stdout is not None
        for line in self._child.stdout:
            if line.startswith(tag + " "):
                return json.loads(line[len(tag) + 1 :])
        raise RuntimeError(f"llama.cpp's child ended (exit {self._child.wait()}) before {tag}")


def serve(*, gguf: Path, threads: int, n_ctx: int, lines: IO[str], out: IO[str]) -> None:
    import torch

    from bench.offload_llama import LlamaRunner

    start = time.perf_counter()
    runner = LlamaRunner(
        gguf=gguf,
        threads=threads,
        max_batch=1,
        max_tokens=n_ctx,
        repack=True,  # as llama.cpp runs a model by default on this CPU
    )
    print("READY " + json.dumps({"load_s": time.perf_counter() - start}), file=out, flush=True)
    for line in lines:
        ids = json.loads(line)
        if len(ids) + 1 > n_ctx:
            raise SystemExit(f"a prompt of {len(ids)} tokens is longer than n_ctx {n_ctx}")
        # A new context per run (LlamaRunner.run makes one): the prompt is prefilled whole.
        cpu = time.process_time()
        run, _ = runner.run(prompts=torch.tensor([ids]), tokens=0, read_bytes=lambda: 0)
        # Context making and the last logits are in it too: a few ms beside seconds.
        reply = {"prefill_s": run.prefill_s, "cpu_s": time.process_time() - cpu}
        print("PREFILL " + json.dumps(reply), file=out, flush=True)


def main(argv: list[str] | None = None) -> int:
    args = sys.argv[1:] if argv is None else argv
    serve(
        gguf=Path(args[0]),
        threads=int(args[1]),
        n_ctx=int(args[2]),
        lines=sys.stdin,
        out=sys.stdout,
    )
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
