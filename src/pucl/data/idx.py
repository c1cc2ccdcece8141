"""The IDX file format of MNIST and Fashion-MNIST (plain or gzip-compressed).

Header: two zero bytes, a type code (0x08 = unsigned byte), the number of dimensions, then
each dimension as a big-endian int32; the data follow in row-major order.
"""

from __future__ import annotations

import gzip
import struct
from pathlib import Path

import numpy as np

from pucl.errors import DataError

_TYPES = {0x08: np.uint8, 0x09: np.int8, 0x0B: ">i2", 0x0C: ">i4", 0x0D: ">f4", 0x0E: ">f8"}


def read_idx(path: Path) -> np.ndarray:
    opener = gzip.open if path.suffix == ".gz" else open
    try:
        with opener(path, "rb") as fh:
            raw = fh.read()
    except (OSError, EOFError) as exc:
        raise DataError(f"cannot read IDX file {path}: {exc}") from None
    if len(raw) < 4 or raw[0] != 0 or raw[1] != 0 or raw[2] not in _TYPES:
        raise DataError(f"{path} is not an IDX file (bad magic number {raw[:4].hex()})")
    ndim = raw[3]
    header = 4 + 4 * ndim
    shape = struct.unpack(f">{ndim}i", raw[4:header])
    dtype = np.dtype(_TYPES[raw[2]])
    expected = int(np.prod(shape)) * dtype.itemsize
    if len(raw) - header != expected:
        raise DataError(f"{path}: header declares shape {list(shape)} ({expected} bytes) "
                        f"but the file holds {len(raw) - header} bytes of data")
    return np.frombuffer(raw, dtype=dtype, offset=header).reshape(shape).astype(
        dtype.newbyteorder("="))
