from hypothesis import given, strategies as st

from scheduler.timer import RecallHandle, TimerIndex, decode_recall_handle


def test_due_in_order_and_resolve_removes():
    index = TimerIndex()
    index.add(1, 300)
    index.add(0, 100)
    index.add(2, 200)
    assert index.due(250, 10) == [(0, 100), (2, 200)]
    assert index.due(250, 10) == [(0, 100), (2, 200)]  # still pending until resolved
    assert index.resolve(0) and not index.resolve(0)
    assert index.due(1000, 1) == [(2, 200)]
    assert index.next_due_ms() == 200


def test_checkpoint_round_trip():
    index = TimerIndex()
    index.add(4, 40)
    index.scan_offset, index.op_offset = 5, 2
    again = TimerIndex.from_document(index.to_document())
    assert again.pending == {4: 40} and again.scan_offset == 5 and again.op_offset == 2


@given(st.text(max_size=100))
def test_recall_handle_garbage_never_crashes(text):
    decode_recall_handle(text)


def test_recall_handle_round_trip():
    handle = RecallHandle("T", 7, "01ABC")
    assert decode_recall_handle(handle.encode()) == handle
