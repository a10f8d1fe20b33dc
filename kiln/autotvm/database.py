"""Record databases (TVM's ``autotvm.database``): store measurement records by (target, task, config)."""
from __future__ import annotations

from ..error import KilnError
from .record import RecordError, decode, encode, measure_str_key


class Database:
    """Base class of record stores."""

    def load(self, inp, get_all: bool = False):
        """The newest result for ``inp`` (all results with ``get_all``), or None."""
        raise NotImplementedError

    def save(self, inp, res, extend: bool = False) -> None:
        """Store a result for ``inp``; with ``extend`` keep earlier ones too."""
        raise NotImplementedError

    def filter(self, func) -> list:
        """All (input, result) records for which ``func(input, result)`` is true."""
        raise NotImplementedError

    def get(self, key):
        raise NotImplementedError

    def set(self, key, value) -> None:
        raise NotImplementedError


def filter_inputs(db: Database, measure_inputs, retry: bool = False) -> list:
    """The inputs without a stored result (or, with ``retry``, whose stored result failed)."""
    unsaved = []
    for inp in measure_inputs:
        res = db.load(inp)
        if res is None or (retry and res.error_no != 0):
            unsaved.append(inp)
    return unsaved


class RedisDatabase(Database):
    """Records in a key-value store, several records per key joined by ``$`` (TVM's layout). The
    default store is a Redis server (needs the ``redis`` package)."""

    MAGIC_SPLIT = "$"

    def __init__(self, db_index: int = 1):
        try:
            import redis
        except ImportError as err:
            raise KilnError("RedisDatabase needs the 'redis' package (pip install redis); use "
                            "autotvm.database.MemoryDatabase for an in-process store") from err
        self.db = redis.StrictRedis(db=db_index)

    def _records(self, value) -> list:
        if value is None:
            return []
        if isinstance(value, bytes):
            value = value.decode()
        out = []
        for row in value.split(self.MAGIC_SPLIT):
            try:
                rec = decode(row)
            except RecordError:
                continue
            if rec is not None:
                out.append(rec)
        return out

    def load(self, inp, get_all: bool = False):
        current = self.get(measure_str_key(inp))
        if current is None:
            return None
        results = [r[1] for r in self._records(current)]
        if get_all:
            return results
        return max(results, key=lambda r: r.timestamp) if results else None

    def save(self, inp, res, extend: bool = False) -> None:
        key = measure_str_key(inp)
        current = self.get(key)
        if isinstance(current, bytes):
            current = current.decode()
        if not extend or current is None:
            self.set(key, encode(inp, res))
        else:
            self.set(key, self.MAGIC_SPLIT.join(current.split(self.MAGIC_SPLIT) + [encode(inp, res)]))

    def filter(self, func) -> list:
        matched = []
        for key in list(self.db.keys()):
            for rec in self._records(self.get(key)):
                if func(*rec):
                    matched.append(rec)
        return matched

    def get(self, key):
        return self.db.get(key)

    def set(self, key, value) -> None:
        self.db.set(key, value)

    def flush(self) -> None:
        self.db.flushdb()


class MemoryDatabase(RedisDatabase):
    """The same store kept in a Python dict (no server)."""

    def __init__(self):  # pylint: disable=super-init-not-called
        self.db: dict = {}

    def get(self, key):
        return self.db.get(key)

    def set(self, key, value) -> None:
        self.db[key] = value

    def flush(self) -> None:
        self.db = {}


class DummyDatabase(MemoryDatabase):
    """TVM's name for the in-memory database used in tests."""
