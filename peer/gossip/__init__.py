"""Gossip of mesh state and failure detection, sans-I/O.

``Membership`` holds one peer's view of the mesh: a versioned ``PeerRecord``
and ``LinkReport`` per node, spread by push-pull rumors with a bounded
fan-out plus bucketed anti-entropy, and SWIM-style suspicion with
incarnation numbers. The agent feeds it link events and received messages and
sends what it returns. See docs/gossip.md.
"""

from gleam.peer.gossip.config import GossipConfig
from gleam.peer.gossip.events import (
    Died,
    Joined,
    MembershipEvent,
    Refuted,
    Rejoined,
    Suspected,
    Updated,
)
from gleam.peer.gossip.membership import GossipStats, Member, Membership, Outgoing
from gleam.peer.gossip.messages import (
    GossipDigest,
    GossipMessage,
    GossipRecords,
    GossipRumor,
    GossipSync,
    GossipWant,
    Summary,
)
from gleam.peer.gossip.records import (
    GpuInfo,
    InvalidRecord,
    Link,
    LinkReport,
    PeerRecord,
    decode_record,
    encode_record,
)

__all__ = [
    "Died",
    "GossipConfig",
    "GossipDigest",
    "GossipMessage",
    "GossipRecords",
    "GossipRumor",
    "GossipStats",
    "GossipSync",
    "GossipWant",
    "GpuInfo",
    "InvalidRecord",
    "Joined",
    "Link",
    "LinkReport",
    "Member",
    "Membership",
    "MembershipEvent",
    "Outgoing",
    "PeerRecord",
    "Refuted",
    "Rejoined",
    "Summary",
    "Suspected",
    "Updated",
    "decode_record",
    "encode_record",
]
