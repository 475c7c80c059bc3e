"""A pop table's signature moves whenever its document changes (scheduler.pop.table.PopTable.signature),
and reads leave it as it is: an unchanged signature lets a periodic snapshot skip the write."""
from scheduler.pop.receipt import ReceiptHandle
from scheduler.pop.records import AckRecord, ChangeRecord, InFlight, PopRecord, QueueKey, ResetRecord, SkipRecord
from scheduler.pop.table import PopTable

K, OTHER = QueueKey("G", "T", 0), QueueKey("H", "T", 1)


def _entry(offset: int, seq: int, deadline_ms: int = 5_000) -> InFlight:
    return InFlight(offset, seq, 1, deadline_ms, 16, offset)


def test_every_change_of_the_document_moves_the_signature_and_reads_do_not():
    table = PopTable()
    changes = [
        lambda: table.ensure(K, 0),
        lambda: table.next_seq(1),
        lambda: table.apply(PopRecord(K, 0, 3, (_entry(0, 10), _entry(2, 11)))),
        lambda: table.apply(ChangeRecord(K, 2, 12, 9_000)),
        lambda: table.apply(AckRecord(K, 0)),
        lambda: table.apply(SkipRecord(K, 3)),
        lambda: table.ensure(OTHER, 7),
        lambda: table.apply(ResetRecord(K, 1, 20)),
        lambda: table.drop_group("H"),
    ]
    reads = [
        lambda: table.ensure(K, 5),   # known already
        lambda: table.get(K),
        lambda: table.check_handle("G", ReceiptHandle("T", 0, 2, 11)),
        lambda: table.expired(10_000, 10),
        lambda: list(table.items()),
    ]
    for step in changes:
        before, document = table.signature(), table.to_document()
        step()
        assert table.to_document() != document, "each change step changes the document"
        assert table.signature() != before
        for read in reads:
            signature, document = table.signature(), table.to_document()
            read()
            assert (table.signature(), table.to_document()) == (signature, document)
