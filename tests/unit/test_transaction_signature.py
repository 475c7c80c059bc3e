"""A transaction table's signature moves with every change of its document and with nothing
else (scheduler.transaction_check.TransactionTable.signature)."""
from scheduler.transaction_check import Resolution, TransactionTable


def test_the_signature_moves_exactly_when_the_document_changes():
    table = TransactionTable(resolved_max=2)
    steps = [
        lambda: table.add_half(1, "T", "tx1", 100, 1_000),
        lambda: table.add_half(1, "T", "tx1", 100, 1_000),     # again: nothing
        lambda: table.add_half(2, "T", "tx2", 100, 1_000),
        lambda: table.checked(2, 500, 1_000),
        lambda: table.checked(9, 500, 1_000),                  # unknown: nothing
        lambda: table.decide(2, Resolution.COMMIT),
        lambda: table.decide(2, Resolution.COMMIT),            # the same decision: nothing
        lambda: table.resolve(1, Resolution.ROLLBACK),
        lambda: table.resolve(1, Resolution.COMMIT),           # a replayed op: nothing
        lambda: table.resolve(2, Resolution.COMMIT),
        lambda: table.add_half(2, "T", "tx2", 100, 1_000),     # resolved already: nothing
        lambda: table.resolve(3, Resolution.COMMIT),           # evicts the oldest resolved (1)
    ]
    for step in steps:
        before, document = table.signature(), table.to_document()
        step()
        assert (table.signature() != before) == (table.to_document() != document)
