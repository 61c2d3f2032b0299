"""Leases without I/O: the server admits by its own capacity; answers carry fresh load."""

from __future__ import annotations

from gleam.peer.sched.cost import Offer
from gleam.peer.sched.lease import Capacity, LeaseDesk, LoadBook
from gleam.peer.sched.messages import ServerLoad


class Server:
    def __init__(self, **cap) -> None:
        self.cap = Capacity(**{"sessions": 0, "max_sessions": 3, "gflops": 10.0, **cap})

    def __call__(self) -> Capacity:
        return self.cap


def test_grants_until_sessions_and_leases_fill_it():
    server = Server(sessions=1)
    desk = LeaseDesk(server)
    assert desk.request("c1", 1, 0, now=0.0).granted
    assert desk.request("c2", 2, 0, now=0.0).granted
    denied = desk.request("c3", 3, 0, now=0.0)
    assert not denied.granted and "full: 1 sessions + 2 leases of 3" in denied.reason
    assert (denied.load.sessions, denied.load.leases, denied.load.max_sessions) == (1, 2, 3)
    assert desk.release("c1", 1)
    assert not desk.release("c1", 1)
    assert desk.request("c3", 3, 0, now=0.0).granted


def test_a_lease_expires_and_a_repeat_renews():
    desk = LeaseDesk(Server(max_sessions=1), ttl=10.0)
    assert desk.request("c1", 7, 0, now=0.0).granted
    assert desk.request("c1", 7, 0, now=8.0).granted  # the same lease again: renewed
    assert not desk.request("c2", 8, 0, now=15.0).granted
    assert desk.request("c2", 8, 0, now=18.5).granted
    assert len(desk) == 1


def test_a_lost_client_frees_its_places_only():
    desk = LeaseDesk(Server(max_sessions=4))
    for lease in (1, 2):
        desk.request("gone", lease, 0, now=0.0)
    desk.request("stays", 1, 0, now=0.0)
    assert desk.drop_client("gone") == 2
    assert len(desk) == 1 and desk.load(0.0).leases == 1


def test_memory_counts_leased_memory_and_queue_is_capped():
    desk = LeaseDesk(Server(max_sessions=8, free_memory=10), max_queue=2)
    assert desk.request("c", 1, 6, now=0.0).granted
    denied = desk.request("c", 2, 6, now=0.0)
    assert not denied.granted and "too little free memory" in denied.reason
    assert denied.load.free_memory == 4
    assert desk.request("c", 3, 4, now=0.0).granted
    assert "queue full" in desk.request("c", 4, 0, now=0.0).reason


def test_a_server_without_a_backend_denies():
    answer = LeaseDesk(Server(serves=False)).request("c", 1, 0, now=0.0)
    assert not answer.granted and answer.reason == "serves no CUDA"


def test_the_book_prefers_a_fresh_answer_to_gossip():
    book = LoadBook(fresh_for=5.0)
    gossip = Offer(speed=100.0, sessions=0, utilisation=0.3, free_memory=99)
    book.heard("n", ServerLoad(sessions=3, leases=2, max_sessions=5, gflops=100.0), now=10.0)
    fresh = book.apply("n", gossip, now=12.0)
    assert (fresh.sessions, fresh.queue, fresh.speed, fresh.utilisation, fresh.free_memory) == \
        (3, 2, 100.0, 0.3, 99)
    assert book.apply("n", gossip, now=15.5) == gossip  # too old: gossip again
    assert book.apply("other", gossip, now=12.0) == gossip


def test_the_book_follows_what_this_agent_did_since_the_answer():
    """A program run right after another must not see the first one's lease and
    session for the seconds an answer stays fresh: the client's own lease became
    a session, and that session ended."""
    book = LoadBook(fresh_for=5.0)
    gossip = Offer(speed=100.0)
    book.heard("n", ServerLoad(sessions=1, leases=1, max_sessions=8, gflops=100.0), now=10.0)
    book.changed("n", sessions=1, leases=-1)  # our lease: the session opened
    assert (book.apply("n", gossip, now=11.0).sessions,
            book.apply("n", gossip, now=11.0).queue) == (2, 0)
    book.changed("n", sessions=-1)  # and ended
    book.changed("n", sessions=-1)
    book.changed("n", sessions=-1)  # never below zero
    assert book.apply("n", gossip, now=12.0).sessions == 0
    assert book.apply("n", gossip, now=15.5) == gossip  # no fresher than it was
    book.changed("unknown", sessions=-1)  # nothing heard: nothing to change
    assert book.apply("unknown", gossip, now=12.0) == gossip
