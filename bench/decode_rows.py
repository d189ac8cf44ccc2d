"""What a decode step of several rows costs against a step of one, with a real model.

    python -m bench.decode_rows --model FILE.gguf [--rows 1,2,4,8] [--prompt-tokens 500]
        [--answer-tokens 24] [--repeats 2]

Opens the model as the engine does (`open_model`, the cached hardware profile), then for
each row count asks that many prompts of `--prompt-tokens` tokens (cut from this
repository's README at different starts) together through the executor's `generate`,
greedy, with no stop token. Prints per run: wall and process CPU seconds, the time to the
first token of every row (prefill) and the median of the later steps (each step gives
every row one token). Rows are alternated over the repeats, so a shared machine's load
weighs on each alike; quote the load (`uptime`) beside the figures.

Why it exists: whether asking documents together (`ragdoll bench each`) can beat asking
them one at a time depends on how a step of several rows compares with a step of one,
and on how much of the work is prefill, which batching does not cut on a CPU.
"""

from __future__ import annotations

import argparse
import os
import statistics
import time
from pathlib import Path

README = Path(__file__).resolve().parent.parent / "README.md"


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--model", type=Path, required=True, help="a .gguf file or model folder")
    parser.add_argument("--rows", default="1,4", help="row counts, comma-separated")
    parser.add_argument("--prompt-tokens", type=int, default=500)
    parser.add_argument("--answer-tokens", type=int, default=24)
    parser.add_argument("--repeats", type=int, default=2)
    args = parser.parse_args(argv)
    rows = [int(r) for r in args.rows.split(",")]
    if args.answer_tokens < 4 or min(rows) < 1:
        parser.error("--answer-tokens must be at least 4 and each row count at least 1")

    from engine.rag.answer.in_use import open_model
    from engine.runtime.executor.generate import GenerationRequest, Sampling, generate
    from engine.runtime.models.resolve import resolve_model_path

    model = open_model(
        model_path=resolve_model_path(model=str(args.model)), device="cpu", stop_at_eos=False
    )
    executor = model.answerer.executor
    ids = list(model.answerer.tokenizer(README.read_text(encoding="utf-8"))["input_ids"])
    need = args.prompt_tokens + 37 * max(rows)
    if len(ids) < need:
        parser.error(f"the README gives {len(ids)} tokens; {need} are needed")
    print(f"load {os.getloadavg()[0]:.2f}; {os.cpu_count()} CPUs; {args.model.name}", flush=True)
    for _ in range(args.repeats):
        for count in rows:
            requests = [
                GenerationRequest(
                    prompt_ids=tuple(ids[37 * i : 37 * i + args.prompt_tokens]),
                    max_new_tokens=args.answer_tokens,
                )
                for i in range(count)
            ]
            started, cpu = time.perf_counter(), time.process_time()
            steps: list[float] = []
            last = started
            events = generate(model=executor, requests=requests, sampling=Sampling())
            for seen, _event in enumerate(events, start=1):
                if seen % count == 0:  # a step has given every row its token
                    now = time.perf_counter()
                    steps.append(now - last)
                    last = now
            wall, used = time.perf_counter() - started, time.process_time() - cpu
            later = statistics.median(steps[2:]) * 1000
            print(
                f"rows {count}: wall {wall:.2f} s, CPU {used:.2f} s, first tokens "
                f"{steps[0]:.2f} s, later steps median {later:.1f} ms "
                f"({later / count:.1f} ms a row), load {os.getloadavg()[0]:.2f}",
                flush=True,
            )
    model.close()
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
