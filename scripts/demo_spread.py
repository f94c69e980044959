"""How stable the demo's outcome is: `xsyn demo` for several seeds, at a given CPU thread count.

    nice -n 10 python scripts/demo_spread.py --seeds 1111,1,2 --threads 1 --output-dir /tmp/spread1
    nice -n 10 python scripts/demo_spread.py --seeds 1111 --threads 2 --output-dir /tmp/spread2

Each seed's demo goes into `<output-dir>/seed<N>` (replacing an earlier one); one JSON line per seed
(test accuracy per variant and language, seconds) is printed as it finishes, then the mean, sd and
range per variant and language over the seeds. Same seed and thread count: bit-identical results;
another thread count sums floats in another order, so compare it with the seed spread (docs/reproducibility.md).
The demo figures of README.md and docs/getting-started.md come from this script.
"""

from __future__ import annotations

import argparse
import json
import statistics


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--seeds", default="1111,1,2", help="comma-separated seeds")
    parser.add_argument("--threads", type=int, default=1, help="torch CPU threads")
    parser.add_argument("--output-dir", required=True)
    args = parser.parse_args()

    import torch

    torch.set_num_threads(args.threads)
    from xsyn.experiments.demo import run_demo

    results = []
    for seed in (int(s) for s in args.seeds.split(",")):
        summary = run_demo(f"{args.output_dir}/seed{seed}", seed=seed, progress=False, overwrite=True)
        row = {"seed": seed, "threads": args.threads, "per_language": summary["per_language"],
               "seconds": round(summary["seconds"])}
        results.append(row)
        print(json.dumps(row), flush=True)
    for variant in results[0]["per_language"]:
        for lang in results[0]["per_language"][variant]:
            values = [row["per_language"][variant][lang] for row in results]
            sd = statistics.stdev(values) if len(values) > 1 else 0.0
            print(f"{variant:5} {lang}: mean {statistics.fmean(values):5.1f}  sd {sd:4.1f}  "
                  f"range {min(values):5.1f}-{max(values):5.1f}  ({len(values)} seeds, {args.threads} threads)")


if __name__ == "__main__":
    main()
