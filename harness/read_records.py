"""Writes the rows of a Parquet file as JSON Lines (for `cuda-agent tasks import ops6k`, which
reads JSON Lines). Usage: read_records.py IN.parquet OUT.jsonl"""

import json
import sys

import pyarrow.parquet as pq


def main(source: str, target: str) -> None:
    table = pq.read_table(source)
    with open(target, "w") as out:
        for batch in table.to_batches():
            for row in batch.to_pylist():
                out.write(json.dumps(row, default=str) + "\n")


if __name__ == "__main__":
    if len(sys.argv) != 3:
        sys.exit(__doc__)
    main(sys.argv[1], sys.argv[2])
