"""Writes the records of an RL export (JSON Lines, one object a line) as a Parquet file, the form
verl's datasets read (`data.train_files`, `data.val_files`). Run by `cuda-agent rollout` and
`cuda-agent export` when the output's name ends in .parquet:

    python3 rl_parquet.py RECORDS.jsonl OUT.parquet

Columns are the records' keys, typed by pyarrow from the values. "tools" holds JSON schemas that
differ from tool to tool, which no one Parquet type fits: it is stored as JSON text (verl's
multi-turn SFT dataset and `json.loads` both take it so). The file is written beside OUT and
renamed into place, so a failed write leaves nothing half-made."""

import json
import os
import sys

import pyarrow as pa
import pyarrow.parquet as pq

JSON_TEXT_COLUMNS = ("tools",)


def load(path: str) -> list[dict]:
    records = []
    with open(path, encoding="utf-8") as f:
        for number, line in enumerate(f, 1):
            if not line.strip():
                continue
            record = json.loads(line)
            if not isinstance(record, dict):
                raise ValueError(f"{path}:{number}: a record is a JSON object")
            for column in JSON_TEXT_COLUMNS:
                if column in record and not isinstance(record[column], str):
                    record[column] = json.dumps(record[column])
            records.append(record)
    return records


def main() -> int:
    if len(sys.argv) != 3:
        print("usage: rl_parquet.py RECORDS.jsonl OUT.parquet", file=sys.stderr)
        return 2
    source, target = sys.argv[1], sys.argv[2]
    table = pa.Table.from_pylist(load(source))
    part = target + ".part"
    pq.write_table(table, part)
    os.replace(part, target)
    return 0


if __name__ == "__main__":
    sys.exit(main())
