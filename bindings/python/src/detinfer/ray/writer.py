"""Writers of output records: DIR/records.jsonl or DIR/records.parquet. The
file is written as NAME.partial and renamed by commit(), so a run that fails
leaves no file that looks complete."""

from __future__ import annotations

import json
import os
from typing import Any, Dict, List, Sequence

from .records import OPTIONAL_FIELDS, RECORD_FIELDS, Request, _is_int


class _Writer:
    def __init__(self, path: str) -> None:
        self.path = path
        self.partial = path + ".partial"

    def commit(self) -> None:
        self._finish()
        os.replace(self.partial, self.path)

    def close(self) -> None:
        """After commit() a no-op; otherwise removes the partial file."""
        self._finish()
        if os.path.exists(self.partial):
            os.remove(self.partial)

    def _finish(self) -> None:
        raise NotImplementedError

    def write(self, rec: Dict[str, Any]) -> None:
        raise NotImplementedError


class JsonlWriter(_Writer):
    def __init__(self, path: str) -> None:
        super().__init__(path)
        self.f = open(self.partial, "w", encoding="utf-8")

    def write(self, rec: Dict[str, Any]) -> None:
        self.f.write(json.dumps(rec, ensure_ascii=False) + "\n")

    def _finish(self) -> None:
        if not self.f.closed:
            self.f.close()


class ParquetWriter(_Writer):
    """Row groups of ROWS records. The id column is int64 when every input id
    is an integer, else string (integer ids then written as their decimal text)."""

    ROWS = 4096

    def __init__(self, path: str, int_ids: bool, columns: Sequence[str]) -> None:
        import pyarrow as pa
        import pyarrow.parquet as pq

        super().__init__(path)
        types = {"id": pa.int64() if int_ids else pa.string(), "text": pa.string(),
                 "tokens": pa.list_(pa.int32()), "n_prompt": pa.int32(), "digest": pa.string(),
                 "finish": pa.string(), "error": pa.string(), "profile": pa.string(), "numerics": pa.int32(),
                 "logits_digests": pa.list_(pa.string()), "worker": pa.string()}
        self.int_ids = int_ids
        self.pa = pa
        self.schema = pa.schema([(c, types[c]) for c in columns])
        self.writer = pq.ParquetWriter(self.partial, self.schema)
        self.rows: List[Dict[str, Any]] = []

    def write(self, rec: Dict[str, Any]) -> None:
        if not self.int_ids:
            rec = dict(rec, id=str(rec["id"]))
        self.rows.append(rec)
        if len(self.rows) >= self.ROWS:
            self._flush()

    def _flush(self) -> None:
        if self.rows:
            self.writer.write_table(self.pa.Table.from_pylist(self.rows, schema=self.schema))
            self.rows = []

    def _finish(self) -> None:
        if self.writer is not None:
            self._flush()
            self.writer.close()
            self.writer = None


def open_writer(output_dir: str, fmt: str, requests: Sequence[Request], logits_digests: bool,
                provenance: bool) -> _Writer:
    columns = list(RECORD_FIELDS) + [c for c, on in zip(OPTIONAL_FIELDS, (logits_digests, provenance)) if on]
    path = os.path.join(output_dir, f"records.{fmt}")
    if fmt == "jsonl":
        return JsonlWriter(path)
    return ParquetWriter(path, all(_is_int(r.id) for r in requests), columns)
