"""Generate the demo scene (both layouts) under data/demo/, or wherever --out says.

python scripts/make_demo.py            # data/demo, skipped if it exists
python scripts/make_demo.py --force    # regenerate
"""

from __future__ import annotations

import argparse
import shutil
import sys
import time
from pathlib import Path

from pointrix_lite.data.demo import ensure_demo

DEFAULT_OUT = Path(__file__).resolve().parent.parent / "data" / "demo"


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--out", type=Path, default=DEFAULT_OUT, help="output folder (default: data/demo)")
    parser.add_argument("--force", action="store_true", help="delete and regenerate an existing demo")
    args = parser.parse_args(argv)
    if args.out.exists():
        if not args.force:
            print(f"{args.out} exists; use --force to regenerate")
            return 0
        shutil.rmtree(args.out)
    start = time.perf_counter()
    ensure_demo(args.out)
    print(f"wrote {args.out}/nerf_synthetic and {args.out}/colmap in {time.perf_counter() - start:.1f} s")
    return 0


if __name__ == "__main__":
    sys.exit(main())
