"""AddressBook: hosts sharing an address share its wait and its one request in flight."""

from crawler.frontier.politeness import AddressBook


def test_a_host_on_a_busy_address_waits_for_the_release_and_is_named_then() -> None:
    book = AddressBook()
    book.claim("10.0.0.1", "a.test")
    assert not book.block_if_busy("10.0.0.1", "a.test")          # its own request
    assert book.block_if_busy("10.0.0.1", "b.test")
    assert not book.block_if_busy("10.0.0.2", "c.test")          # another address
    assert book.release("10.0.0.1", "a.test", ready_at=5.0) == ["b.test"]
    assert not book.block_if_busy("10.0.0.1", "b.test")
    assert book.release("10.0.0.1", "b.test", ready_at=1.0) == []


def test_the_address_waits_as_long_as_its_longest_released_host() -> None:
    book = AddressBook()
    assert book.not_before("10.0.0.1", 2.0) == 2.0               # unknown address: no wait of its own
    book.claim("10.0.0.1", "a.test")
    book.release("10.0.0.1", "a.test", ready_at=5.0)
    book.claim("10.0.0.1", "b.test")
    book.release("10.0.0.1", "b.test", ready_at=3.0)
    assert book.not_before("10.0.0.1", 2.0) == 5.0
    assert book.not_before("10.0.0.1", 6.0) == 6.0


def test_seen_marks_the_address_busy_only_while_the_request_is_in_flight() -> None:
    book = AddressBook()
    book.seen("10.0.0.1", "a.test", busy=False)
    assert not book.block_if_busy("10.0.0.1", "b.test")
    book.seen("10.0.0.1", "a.test", busy=True)
    assert book.block_if_busy("10.0.0.1", "b.test")


def test_forget_drops_only_addresses_nobody_uses_whose_wait_is_over() -> None:
    book = AddressBook()
    book.claim("10.0.0.1", "a.test")                             # busy: kept
    book.claim("10.0.0.2", "b.test")
    book.release("10.0.0.2", "b.test", ready_at=10.0)            # still waiting at now=5: kept
    book.claim("10.0.0.3", "c.test")
    book.release("10.0.0.3", "c.test", ready_at=1.0)             # over: dropped
    book.forget(now=5.0)
    assert book.not_before("10.0.0.2", 0.0) == 10.0
    assert book.block_if_busy("10.0.0.1", "x.test")
    assert book._addresses.keys() == {"10.0.0.1", "10.0.0.2"}
