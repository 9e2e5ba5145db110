"""The fault marks native Spark's JVM writes (``spark_impl.native.fault_plan.read_marks``) are read back by name;
one that is not JSON is an error naming its file, not a bare decoding traceback."""

from __future__ import annotations

import pytest

from spark_impl.native.fault_plan import read_marks


def test_marks_are_read_by_name_and_a_broken_one_is_named(tmp_path):
    (tmp_path / "fault-0").write_text('{"op": "rename", "path": "/c/offsets/3"}')
    (tmp_path / "fault-1").write_text("")
    assert read_marks(str(tmp_path)) == {"fault-0": {"op": "rename", "path": "/c/offsets/3"}, "fault-1": {}}
    assert read_marks(str(tmp_path / "absent")) == {}
    (tmp_path / "fault-2").write_text('{"op": "ren')
    with pytest.raises(ValueError, match="fault-2: a fault mark that is not JSON"):
        read_marks(str(tmp_path))
