//! The fetcher task of one flow: takes the flow's orders (assign or resume, forget), looks up
//! the leader (Metadata) and, for partitions without a position, the start offset by policy
//! (ListOffsets) of each partition, and places it on that leader's fetch session, starting
//! the session if needed. Partitions a session hands back (their leader moved) are placed
//! again, with backoff, keeping their position and last fetched epoch, unless their topic
//! id changed: the topic was deleted and re-created, and its new log is read from its start.

use std::collections::{BTreeMap, HashMap, HashSet};
use std::sync::Arc;
use std::time::Duration;

use tokio::sync::{mpsc, Semaphore};
use tokio_util::sync::CancellationToken;

use super::outage::{Outages, LOOKUP};
use super::response::reset_timestamp;
use super::session::{spawn_session, Placed, SessionOrder, Shared};
use super::{Assignment, FetchConfig, FetchEvent, FetchStats, Order};
use crate::kafka::backoff::Backoff;
use crate::kafka::log_reader::list_offsets;
use crate::kafka::{Cluster, KafkaError, TopicPartition};

pub(super) struct Coordinator {
    /// Metadata and ListOffsets.
    cluster: Arc<Cluster>,
    /// The fetch sessions' connections.
    sessions_cluster: Arc<Cluster>,
    config: FetchConfig,
    events: mpsc::Sender<FetchEvent>,
    shutdown: CancellationToken,
    budget: Arc<Semaphore>,
    stats: Arc<FetchStats>,
    sessions: HashMap<i32, mpsc::UnboundedSender<SessionOrder>>,
    outages: Outages,
    homeless: Vec<Assignment>,
    /// Partitions forgotten since their last assignment: a session may still hand one
    /// back (its leader moved) before it hears of it.
    forgotten: HashSet<TopicPartition>,
    /// Homeless partitions of re-created topics: they start at the log start.
    recreated: HashSet<TopicPartition>,
    /// The latest assignment generation of each partition: a session may hand back an
    /// assignment from before a pause after the resume, which must not replace the new one.
    generations: HashMap<TopicPartition, u32>,
}

impl Coordinator {
    pub(super) fn new(
        cluster: &Cluster,
        config: FetchConfig,
        events: mpsc::Sender<FetchEvent>,
        stats: Arc<FetchStats>,
        (outages, budget): (Outages, Arc<Semaphore>),
        shutdown: CancellationToken,
    ) -> Coordinator {
        Coordinator {
            sessions_cluster: Arc::new(cluster.sibling()),
            cluster: Arc::new(cluster.sibling()),
            budget,
            config,
            events,
            stats,
            shutdown,
            sessions: HashMap::new(),
            outages,
            homeless: Vec::new(),
            forgotten: HashSet::new(),
            recreated: HashSet::new(),
            generations: HashMap::new(),
        }
    }

    pub(super) async fn run(mut self, mut orders: mpsc::UnboundedReceiver<Order>) {
        let (rehome_tx, mut rehome_rx) = mpsc::unbounded_channel::<Assignment>();
        let mut backoff = Backoff::new(Duration::from_millis(100), Duration::from_secs(5));
        // Dialled while the flow discovers what to assign: the first placement does not wait.
        tokio::select! {
            _ = self.shutdown.cancelled() => return,
            _ = self.cluster.any_broker() => {}
        }
        // New assignments are placed at once (the first record of a new partition should not
        // wait); only retries back off.
        let mut fresh = false;
        loop {
            let wait = if self.homeless.is_empty() {
                Duration::from_secs(3600)
            } else if fresh {
                Duration::ZERO
            } else {
                backoff.next_delay()
            };
            tokio::select! {
                _ = self.shutdown.cancelled() => return,
                Some(order) = orders.recv() => {
                    // A discovery assigns many partitions at once: one metadata lookup for all.
                    let mut assigned = self.obey(order);
                    while let Ok(order) = orders.try_recv() {
                        assigned |= self.obey(order);
                    }
                    if assigned {
                        backoff.reset();
                        fresh = true;
                    }
                }
                Some(a) = rehome_rx.recv() => {
                    let current = self.generations.get(&a.tp).is_none_or(|&g| g <= a.generation);
                    if !self.forgotten.contains(&a.tp) && current {
                        self.homeless.push(a);
                    }
                }
                _ = tokio::time::sleep(wait) => {
                    fresh = false;
                    let alias = self.cluster.alias().to_string();
                    match self.place(&rehome_tx).await {
                        Err(e) => self.outages.failed(&alias, LOOKUP, "cannot place partitions on source leaders yet", &e),
                        Ok(()) => {
                            self.outages.succeeded(&alias, LOOKUP, "placing partitions on source leaders");
                            if self.homeless.is_empty() {
                                backoff.reset();
                            }
                        }
                    }
                }
            }
        }
    }

    /// Carries out one order; true if it assigned a partition.
    fn obey(&mut self, order: Order) -> bool {
        match order {
            Order::Assign(a) => {
                self.forgotten.remove(&a.tp);
                self.generations.insert(a.tp.clone(), a.generation);
                self.homeless.retain(|h| h.tp != a.tp);
                self.homeless.push(a);
                true
            }
            Order::Forget(tp) => {
                self.homeless.retain(|a| a.tp != tp);
                self.recreated.remove(&tp);
                for session in self.sessions.values() {
                    let _ = session.send(SessionOrder::Forget(tp.clone()));
                }
                self.forgotten.insert(tp);
                false
            }
        }
    }

    /// Looks up the leaders of homeless partitions and hands each to its leader's session.
    async fn place(
        &mut self,
        rehome: &mpsc::UnboundedSender<Assignment>,
    ) -> Result<(), KafkaError> {
        let mut topics: Vec<String> = self
            .homeless
            .iter()
            .map(|a| a.tp.topic.to_string())
            .collect();
        topics.sort();
        topics.dedup();
        let meta = self.cluster.metadata(Some(&topics)).await?;
        let by_name: HashMap<&str, _> = meta.iter().map(|t| (t.name.as_str(), t)).collect();
        let mut waiting = Vec::new();
        let mut by_leader: BTreeMap<i32, Vec<(Assignment, uuid::Uuid, i32)>> = BTreeMap::new();
        for a in std::mem::take(&mut self.homeless) {
            let found = by_name.get(&*a.tp.topic).and_then(|t| {
                t.partitions
                    .iter()
                    .find(|p| p.partition == a.tp.partition && p.leader >= 0)
                    .map(|p| (t.id, p.leader, p.leader_epoch))
            });
            match found {
                Some((id, leader, epoch)) => {
                    by_leader.entry(leader).or_default().push((a, id, epoch))
                }
                None => waiting.push(a),
            }
        }
        for (leader, mut parts) in by_leader {
            // The leader's session dials while the start offsets are looked up.
            self.session(leader, rehome);
            for (a, topic_id, _) in &mut parts {
                // A nil id is a broker that does not give ids (before Kafka 2.8): no news.
                let known = |id: &uuid::Uuid| !id.is_nil();
                if a.origin.is_some_and(|o| {
                    known(&o.topic_id) && known(topic_id) && o.topic_id != *topic_id
                }) {
                    // The position belongs to the deleted topic's log: the new one starts
                    // at its log start, whatever the reset policy.
                    tracing::warn!(partition = %a.tp, old_position = a.offset, "source topic was deleted and re-created: replicating the new topic from its log start");
                    self.stats.recreated();
                    a.offset = None;
                    a.origin = None;
                    self.recreated.insert(a.tp.clone());
                }
            }
            let unresolved: Vec<_> = parts
                .iter()
                .filter(|(a, _, _)| a.offset.is_none())
                .map(|(a, _, epoch)| (a.tp.clone(), *epoch))
                .collect();
            let (by_policy, from_start): (Vec<_>, Vec<_>) = unresolved
                .into_iter()
                .partition(|(tp, _)| !self.recreated.contains(tp));
            let mut resolved = HashMap::new();
            for (wanted, timestamp) in [
                (by_policy, reset_timestamp(self.config.offset_reset)),
                (from_start, -2),
            ] {
                if wanted.is_empty() {
                    continue;
                }
                if let Ok(conn) = self.cluster.broker(leader).await {
                    let found = list_offsets(&conn, &wanted, timestamp).await;
                    resolved.extend(found.unwrap_or_default());
                }
            }
            for (a, topic_id, leader_epoch) in parts {
                let Some(offset) = a.offset.or_else(|| resolved.get(&a.tp).copied()) else {
                    waiting.push(a);
                    continue;
                };
                self.recreated.remove(&a.tp);
                let placed = Placed {
                    tp: a.tp,
                    topic_id,
                    leader_epoch,
                    offset,
                    last_epoch: a.origin.map_or(-1, |o| o.leader_epoch),
                    generation: a.generation,
                    source_end: -1,
                };
                let order = SessionOrder::Place(placed);
                if let Err(mpsc::error::SendError(order)) = self.session(leader, rehome).send(order)
                {
                    // The session ended (its broker failed) just now: a new one.
                    self.sessions.remove(&leader);
                    let _ = self.session(leader, rehome).send(order);
                }
            }
        }
        self.homeless = waiting;
        Ok(())
    }

    /// The fetch session with `leader`, started if there is none or it ended.
    fn session(
        &mut self,
        leader: i32,
        rehome: &mpsc::UnboundedSender<Assignment>,
    ) -> &mpsc::UnboundedSender<SessionOrder> {
        if self.sessions.get(&leader).is_none_or(|s| s.is_closed()) {
            let shared = Shared {
                cluster: self.sessions_cluster.clone(),
                config: self.config.clone(),
                events: self.events.clone(),
                budget: self.budget.clone(),
                stats: self.stats.clone(),
                outages: self.outages.clone(),
                shutdown: self.shutdown.clone(),
            };
            let session = spawn_session(leader, shared, rehome.clone());
            self.sessions.insert(leader, session);
        }
        &self.sessions[&leader]
    }
}
