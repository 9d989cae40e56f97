//! Each peer address's share of the memory for bodies: a body is charged to its peer's share as
//! well as to the host's, so connections from one address that send large bodies and stall
//! (anyone who reaches the port can open them) hold at most [`PEER_SHARE`], and the apiserver's
//! connections, from addresses of their own, find the rest.

use std::collections::HashMap;
use std::net::IpAddr;
use std::sync::{Arc, Mutex, PoisonError};

use tokio::sync::Semaphore;

use super::MAX_BODY_MEMORY;

/// The memory for bodies one peer address may hold: a quarter of the host's, so it takes four
/// addresses to fill it, and a peer's largest bodies several at once still fit.
pub(super) const PEER_SHARE: usize = MAX_BODY_MEMORY / 4;

/// The shares of the peers holding bodies now.
#[derive(Debug, Default)]
pub(super) struct Peers {
    shares: Mutex<HashMap<IpAddr, Arc<Semaphore>>>,
}

impl Peers {
    /// The share of `peer` (one it holds already, or a whole new one). Shares no body holds are
    /// dropped as new peers come, so the map holds at most the peers with bodies in flight.
    pub(super) fn share(&self, peer: IpAddr) -> Arc<Semaphore> {
        // Every update below is whole before it can panic: a poisoned map is consistent.
        let mut shares = self.shares.lock().unwrap_or_else(PoisonError::into_inner);
        if let Some(share) = shares.get(&peer) {
            return Arc::clone(share);
        }
        shares.retain(|_, share| Arc::strong_count(share) > 1);
        let share = Arc::new(Semaphore::new(PEER_SHARE));
        shares.insert(peer, Arc::clone(&share));
        share
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn each_address_has_its_own_share_kept_while_held() {
        let peers = Peers::default();
        let hostile: IpAddr = "127.0.0.2".parse().unwrap();
        let apiserver: IpAddr = "127.0.0.1".parse().unwrap();
        let held = Arc::clone(&peers.share(hostile))
            .try_acquire_many_owned(u32::try_from(PEER_SHARE).unwrap())
            .unwrap();
        assert_eq!(peers.share(hostile).available_permits(), 0);
        assert_eq!(peers.share(apiserver).available_permits(), PEER_SHARE);
        drop(held);
        assert_eq!(peers.share(hostile).available_permits(), PEER_SHARE);
    }

    #[test]
    fn shares_no_body_holds_are_dropped() {
        let peers = Peers::default();
        for i in 0..=255u8 {
            drop(peers.share(IpAddr::from([10, 0, 0, i])));
        }
        peers.share("10.0.1.0".parse().unwrap());
        assert_eq!(peers.shares.lock().unwrap().len(), 1);
    }
}
