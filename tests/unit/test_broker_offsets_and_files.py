from hypothesis import given, settings
from hypothesis import strategies as st

from metadata.consumer_offsets import ConsumerOffsetTable, OffsetKey, loads
from metadata.data_version import DataVersion
from services.broker.config_files import read_document, write_document
from services.broker.dedupe import SendDedupe
from services.broker.offset_keeper import OffsetKeeper


def test_version_bumps_every_step_commits():
    keeper = OffsetKeeper(version_step=3)
    for offset in range(1, 3):
        keeper.commit("T", "G", 0, offset, now_ms=offset)
    assert keeper.table.data_version.counter == 0
    keeper.commit("T", "G", 0, 3, now_ms=3)
    assert keeper.table.data_version.counter == 1 and keeper.table.data_version.timestamp_ms == 3


def test_persist_with_changed_offsets_always_moves_the_version():
    keeper = OffsetKeeper(version_step=500)
    keeper.commit("T", "G", 0, 1, now_ms=1)
    document = keeper.table_to_persist(now_ms=10).to_document()
    assert document["dataVersion"]["counter"] == 1
    assert keeper.table_to_persist(now_ms=20) is None  # nothing changed: no write, no bump
    keeper.commit("T", "G", 0, 2, now_ms=30)
    assert keeper.table_to_persist(now_ms=40).to_document()["dataVersion"]["counter"] == 2


def test_atomic_file_falls_back_to_bak(tmp_path):
    path = tmp_path / "config" / "consumerOffset.json"
    keeper = OffsetKeeper(1)
    keeper.commit("T", "G", 0, 5, 1)
    write_document(path, keeper.table_to_persist(2).to_document())
    keeper.commit("T", "G", 0, 6, 3)
    write_document(path, keeper.table_to_persist(4).to_document())
    text = path.read_text()
    assert "{0:6}" in text.replace("\t", "").replace("\n", "").replace(" ", "")
    path.write_text("{corrupt")
    table = read_document(path, lambda doc: loads(__import__("json").dumps(doc)))
    assert table.get("T", "G", 0) == 5


def test_dedupe_window_and_bound():
    dedupe = SendDedupe(window_ms=100, max_entries=2)
    dedupe.remember("T", "a", 1, now_ms=0)
    assert dedupe.lookup("T", "a", 100) == 1 and dedupe.lookup("U", "a", 100) is None  # per topic
    assert dedupe.lookup("T", "a", 200) == 1 and dedupe.lookup("T", "a", 201) is None  # two windows at most
    dedupe.remember("T", "b", 2, 0)
    dedupe.remember("T", "c", 3, 0)
    assert dedupe.lookup("T", "a", 0) is None and dedupe.lookup("T", "c", 0) == 3


def test_dedupe_drops_a_generation_whole_once_the_next_is_full():
    dedupe = SendDedupe(window_ms=100, max_entries=4)  # generations of 2
    dedupe.remember_many("T", ["a", "b"], [1, 2], 0)
    dedupe.remember_many("T", ["c", "d"], [3, 4], 0)  # a, b turn old
    assert [dedupe.lookup("T", key, 0) for key in "abcd"] == [1, 2, 3, 4] and len(dedupe) == 4
    dedupe.remember("T", "e", 5, 0)  # c, d turn old; a, b are dropped
    assert [dedupe.lookup("T", key, 0) for key in "abcde"] == [None, None, 3, 4, 5] and len(dedupe) == 3
    dedupe.remember("T", "c", 30, 0)  # answered again: its latest outcome
    assert dedupe.lookup("T", "c", 0) == 30


def test_dedupe_keeps_an_id_one_window_at_least_and_none_past_two():
    dedupe = SendDedupe(window_ms=100, max_entries=1000)
    dedupe.remember_many("T", ["a", ""], [1, 2], 0)  # one without an id: not kept
    assert len(dedupe) == 1 and dedupe.lookup("T", "", 0) is None
    dedupe.remember("T", "b", 2, 150)  # the young generation is older than the window: it turns old
    assert dedupe.lookup("T", "a", 150) == 1 and dedupe.lookup("T", "b", 150) == 2 and len(dedupe) == 2
    assert dedupe.lookup("T", "a", 201) is None and dedupe.lookup("T", "b", 201) == 2  # a's generation: 2 windows
    dedupe.remember("T", "c", 3, 300)  # b's generation turns old, a's is dropped
    assert len(dedupe) == 2 and dedupe.lookup("T", "b", 300) == 2 and dedupe.lookup("T", "c", 300) == 3
    assert dedupe.lookup("T", "b", 351) is None and dedupe.lookup("T", "c", 351) == 3
    assert dedupe.knows_none("T", {"x", "a"}) and not dedupe.knows_none("T", {"x", "b"})
    assert dedupe.knows_none("U", {"b"})  # the same id sent to another topic is another message
    dedupe.clear()
    assert len(dedupe) == 0 and dedupe.knows_none("T", {"c"})


@settings(max_examples=300, deadline=None)
@given(st.lists(st.tuples(st.integers(0, 50), st.sampled_from("TU"), st.text("abc", max_size=2)), max_size=60),
       st.integers(0, 8), st.integers(1, 40), st.integers(0, 100))
def test_dedupe_answers_within_its_bounds(events, max_entries, window, idle):
    """Against a model of every remember: an id is answered with its latest outcome only, never
    two windows after it was remembered; it is forgotten only once more than the window passed
    or max_entries / 2 remembers came after it; and at most max_entries ids are kept."""
    dedupe, now, latest = SendDedupe(window_ms=window, max_entries=max_entries), 0, {}
    generation = max(1, max_entries // 2)
    for step, (advance, topic, message_id) in [*enumerate(events), (len(events), (idle, None, None))]:
        now += advance
        if topic is not None:  # the last event: time passes with no send (lookups only)
            dedupe.remember(topic, message_id, step, now)
        if message_id:
            latest[(topic, message_id)] = (now, step)
        for (t, m), (at, outcome) in latest.items():
            found = dedupe.lookup(t, m, now)
            if found is not None:
                assert found == outcome and now - at <= 2 * window
            elif max_entries:
                assert now - at > window or step - outcome >= generation, (t, m, at, now)
        assert len(dedupe) <= 2 * generation if max_entries else len(dedupe) == 0


@given(st.lists(st.dictionaries(st.tuples(st.sampled_from(["T", "U"]), st.sampled_from(["G", "H", "I"]), st.integers(0, 3)),
                                st.integers(0, 10**12), max_size=6), max_size=5))
def test_folding_commits_gives_the_table_built_whole_and_leaves_every_earlier_table_as_it_was(batches):
    """ConsumerOffsetTable.with_offsets shares unchanged keys with the old table: each table in the
    chain equals one built from scratch from every commit up to it, and stays so afterwards."""
    table, merged, chain = ConsumerOffsetTable(), {}, []
    for number, updates in enumerate(batches):
        table = table.with_offsets(updates, DataVersion(counter=number + 1))
        merged = {**merged, **updates}
        whole = {}
        for (topic, group, queue_id), offset in merged.items():
            whole.setdefault(OffsetKey(topic, group), {})[queue_id] = offset
        chain.append((table, ConsumerOffsetTable(DataVersion(counter=number + 1), whole), dict(merged)))
    for table, expected, merged in chain:
        assert table == expected and table.to_document() == expected.to_document()
        assert {(t, g, q): o for t, g, q, o in table.rows()} == merged
