"""metadata.checksum.crc32 is zlib's CRC-32, value for value: records written before it and
digests clients check are unchanged."""
import zlib

from hypothesis import given, strategies as st

from metadata.checksum import crc32


@given(st.binary(max_size=5000), st.integers(0, 2**32 - 1))
def test_the_same_value_as_zlib_for_any_data_and_start(data, start):
    assert crc32(data) == zlib.crc32(data)
    assert crc32(data, start) == zlib.crc32(data, start)
    assert crc32(memoryview(data)[1:]) == zlib.crc32(data[1:])
