//! Scale-out: every strait process started on a flow with `scale.out.enabled` joins one
//! classic group on the target cluster (protocol type `strait`), and Kafka's group
//! coordinator decides who is in it. The leader splits the flow's slots (`assignor`); each
//! member replicates the source partitions of its slots. Nothing home-made decides
//! membership: a member that stops heartbeating is out after the session timeout, and its
//! slots go to the others.
//!
//! The loop below is the member: FindCoordinator, JoinGroup (a first join learns its member
//! id from MEMBER_ID_REQUIRED; `group.instance.id` makes it static, so a restart within the
//! session timeout gets its slots back without a rebalance), SyncGroup, Heartbeat, and
//! LeaveGroup at a graceful stop. What it gains and loses goes to the flow as [`Change`]s:
//! a slot taken away is handed over only once the flow drained and committed it
//! ([`Change::Revoked`] waits for that), and then the member joins again, which lets the
//! leader give it to its new owner. A member that cannot reach the coordinator for most of
//! the session timeout writes nothing more ([`Lease`]) until the coordinator says whether
//! its slots are still its own; if not, it drops them without a commit ([`Change::Lost`]).

pub mod assignor;

use std::collections::{BTreeMap, BTreeSet};
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::Arc;
use std::time::{Duration, Instant};

use kafka_protocol::error::ResponseError;
use kafka_protocol::messages::join_group_request::JoinGroupRequestProtocol;
use kafka_protocol::messages::leave_group_request::MemberIdentity;
use kafka_protocol::messages::sync_group_request::SyncGroupRequestAssignment;
use kafka_protocol::messages::{
    GroupId, HeartbeatRequest, JoinGroupRequest, LeaveGroupRequest, SyncGroupRequest,
};
use kafka_protocol::protocol::StrBytes;
use tokio::sync::{mpsc, oneshot};
use tokio_util::sync::CancellationToken;

use crate::kafka::backoff::Backoff;
use crate::kafka::{groups, Cluster, Connection, KafkaError};
use assignor::{Assignment, Subscription};

/// The group's protocol type: the coordinator keeps groups of other types (a consumer
/// group, MM2's `connect` workers) from sharing its id.
pub const PROTOCOL_TYPE: &str = "strait";
/// The one assignment protocol; a later, incompatible one gets another name.
const PROTOCOL_NAME: &str = "slots-v0";

/// A member's settings (`scale.out.*`).
#[derive(Debug, Clone)]
pub struct GroupConfig {
    pub group: String,
    /// `group.instance.id`: static membership.
    pub instance_id: Option<String>,
    pub session_timeout: Duration,
    /// How long the coordinator waits for every member to join again (a member hands its
    /// slots over before it does: the drain timeout plus a margin).
    pub rebalance_timeout: Duration,
    pub slots: u32,
    /// What every member must agree on (`assignor::fingerprint`).
    pub fingerprint: String,
}

/// What the member tells the flow.
#[derive(Debug)]
pub enum Change {
    /// Start replicating these slots (no other member has them).
    Acquired(BTreeSet<u32>),
    /// Stop these slots, drain what was fetched, commit, then answer: the member joins the
    /// group again once `done` is answered (or dropped), and the leader gives them away.
    Revoked {
        slots: BTreeSet<u32>,
        done: oneshot::Sender<()>,
    },
    /// Stop these slots at once, committing nothing more: another member may own them now.
    Lost {
        slots: BTreeSet<u32>,
        done: oneshot::Sender<()>,
    },
}

/// Until when the member may write its slots: the group coordinator cannot have given
/// them to another member before then. Renewed by every answer that says the member is in
/// good standing (a SyncGroup, a Heartbeat) by two thirds of the session timeout, and held
/// through a rebalance (the coordinator waits the rebalance timeout for the member to
/// join). The produce engine sends nothing while it has run out: a process frozen
/// (SIGSTOP) or cut off from the coordinator past it writes nothing when it wakes, until
/// the group has told it what it still owns. A monotonic clock, which runs on while the
/// process is stopped.
#[derive(Debug)]
pub struct Lease {
    origin: Instant,
    /// Milliseconds since `origin`.
    until_ms: AtomicU64,
}

impl Default for Lease {
    fn default() -> Lease {
        Lease {
            origin: Instant::now(),
            until_ms: AtomicU64::new(0),
        }
    }
}

impl Lease {
    pub fn holds(&self) -> bool {
        (self.origin.elapsed().as_millis() as u64) < self.until_ms.load(Ordering::Relaxed)
    }

    /// Runs until `from + by`.
    pub(crate) fn renew(&self, from: Instant, by: Duration) {
        let until = from.saturating_duration_since(self.origin) + by;
        self.until_ms
            .store(until.as_millis() as u64, Ordering::Relaxed);
    }

    /// Runs until `from + by` at least, if it still runs now.
    fn extend(&self, from: Instant, by: Duration) {
        if self.holds() {
            let until = (from.saturating_duration_since(self.origin) + by).as_millis() as u64;
            self.until_ms.fetch_max(until, Ordering::Relaxed);
        }
    }
}

/// How a join or a heartbeat went wrong.
enum Rejoin {
    /// Join again keeping the member id and the slots (a rebalance started, the coordinator
    /// moved or cannot be reached for now).
    Soon,
    /// The coordinator no longer knows this member: its slots may be another's already.
    Reset,
}

/// The member: joins, follows rebalances and heartbeats until `shutdown`, then leaves the
/// group (a static member stays, so that its restart moves nothing). Fails only on what no
/// retry mends: another process with the same `group.instance.id`, or a group id used by
/// something that is not strait.
pub async fn run(
    cluster: Arc<Cluster>,
    config: GroupConfig,
    lease: Arc<Lease>,
    changes: mpsc::UnboundedSender<Change>,
    shutdown: CancellationToken,
) -> Result<(), KafkaError> {
    let mut member = Member {
        cluster,
        config,
        lease,
        last_answer: Instant::now(),
        changes,
        member_id: String::new(),
        generation: -1,
        owned: BTreeSet::new(),
        conn: None,
        refused: String::new(),
    };
    let mut backoff = Backoff::new(Duration::from_millis(100), Duration::from_secs(5));
    loop {
        let Err(end) = tokio::select! {
            r = member.round() => r,
            () = shutdown.cancelled() => break,
        };
        match end {
            Err(e) => {
                // Another process may have the slots now: nothing more is written or
                // committed for them on the way out.
                member
                    .lose("the group coordinator refused this member for good")
                    .await;
                return Err(e);
            }
            Ok(Rejoin::Soon) => {}
            Ok(Rejoin::Reset) => {
                member.member_id.clear();
                member.generation = -1;
                member
                    .lose("the group coordinator no longer knows this member")
                    .await;
            }
        }
        if member.conn.is_some() {
            // The coordinator answers: join again at once.
            backoff.reset();
            continue;
        }
        tokio::select! {
            () = tokio::time::sleep(backoff.next_delay()) => {}
            () = shutdown.cancelled() => break,
        }
    }
    member.leave().await;
    Ok(())
}

struct Member {
    cluster: Arc<Cluster>,
    config: GroupConfig,
    lease: Arc<Lease>,
    /// When the coordinator last answered this member.
    last_answer: Instant,
    changes: mpsc::UnboundedSender<Change>,
    member_id: String,
    generation: i32,
    owned: BTreeSet<u32>,
    /// The coordinator, while it answers.
    conn: Option<Connection>,
    /// The reason the leader last gave for refusing work (logged once per reason).
    refused: String,
}

/// A round's end: `Ok(why)` to join again, `Err(e)` fatal.
type RoundEnd = Result<Rejoin, KafkaError>;

impl Member {
    fn group_id(&self) -> GroupId {
        GroupId(StrBytes::from_string(self.config.group.clone()))
    }

    fn instance_id(&self) -> Option<StrBytes> {
        self.config.instance_id.clone().map(StrBytes::from_string)
    }

    fn heartbeat_interval(&self) -> Duration {
        self.config.session_timeout / 3
    }

    /// The coordinator answered at `at` that the member is in good standing.
    fn in_good_standing(&mut self, at: Instant) {
        self.last_answer = at;
        self.lease.renew(at, self.config.session_timeout * 2 / 3);
    }

    /// The coordinator's connection; on failure the round ends to be tried again.
    async fn coordinator(&mut self) -> Result<Connection, RoundEnd> {
        if let Some(conn) = self.conn.as_ref().filter(|c| c.is_usable()) {
            return Ok(conn.clone());
        }
        self.conn = None;
        match groups::coordinator(&self.cluster, &self.config.group).await {
            Ok(conn) => {
                self.conn = Some(conn.clone());
                Ok(conn)
            }
            Err(e) => {
                tracing::warn!(group = %self.config.group, error = %e, "cannot reach the scale-out group's coordinator; retrying");
                Err(Ok(Rejoin::Soon))
            }
        }
    }

    /// What an error code of the group's answers means for the member.
    fn verdict(&mut self, api: &'static str, code: i16) -> RoundEnd {
        let error = ResponseError::try_from_code(code);
        match error {
            Some(
                ResponseError::UnknownMemberId
                | ResponseError::IllegalGeneration
                | ResponseError::MemberIdRequired,
            ) => Ok(Rejoin::Reset),
            Some(ResponseError::RebalanceInProgress) => Ok(Rejoin::Soon),
            Some(
                ResponseError::NotCoordinator
                | ResponseError::CoordinatorNotAvailable
                | ResponseError::CoordinatorLoadInProgress,
            ) => {
                self.conn = None;
                Ok(Rejoin::Soon)
            }
            Some(ResponseError::FencedInstanceId) => Err(KafkaError::Broker {
                api,
                context: format!(
                    "group {}: another process runs with scale.out.instance.id {}",
                    self.config.group,
                    self.config.instance_id.as_deref().unwrap_or("")
                ),
                code: ResponseError::FencedInstanceId,
            }),
            Some(ResponseError::InconsistentGroupProtocol) => Err(KafkaError::Broker {
                api,
                context: format!(
                    "group {}: its members are not strait processes of this version (set scale.out.group to a group id of strait's own)",
                    self.config.group
                ),
                code: ResponseError::InconsistentGroupProtocol,
            }),
            Some(other) => {
                if other.is_retriable() {
                    Ok(Rejoin::Soon)
                } else {
                    Err(KafkaError::Broker {
                        api,
                        context: format!("group {}", self.config.group),
                        code: other,
                    })
                }
            }
            None => Ok(Rejoin::Soon),
        }
    }

    /// One generation: join, sync, act on the assignment, heartbeat until the group
    /// rebalances. Every way out is a reason to join again, or a fatal error.
    async fn round(&mut self) -> Result<std::convert::Infallible, RoundEnd> {
        let conn = self.coordinator().await?;
        let subscription = Subscription {
            fingerprint: self.config.fingerprint.clone(),
            owned: self.owned.clone(),
        };
        let join = JoinGroupRequest::default()
            .with_group_id(self.group_id())
            .with_session_timeout_ms(self.config.session_timeout.as_millis() as i32)
            .with_rebalance_timeout_ms(self.config.rebalance_timeout.as_millis() as i32)
            .with_member_id(StrBytes::from_string(self.member_id.clone()))
            .with_group_instance_id(self.instance_id())
            .with_protocol_type(StrBytes::from_static_str(PROTOCOL_TYPE))
            .with_protocols(vec![JoinGroupRequestProtocol::default()
                .with_name(StrBytes::from_static_str(PROTOCOL_NAME))
                .with_metadata(subscription.encode())]);
        // While the member joins, the coordinator keeps its place for the rebalance timeout
        // after its last answer.
        self.lease
            .extend(self.last_answer, self.config.rebalance_timeout);
        let joined = match conn.send(&join).await {
            Ok(r) => r,
            Err(e) => return Err(self.io(e)),
        };
        if joined.error_code == ResponseError::MemberIdRequired.code() {
            // KIP-394: the coordinator names the member id to join with.
            self.member_id = joined.member_id.to_string();
            return Err(Ok(Rejoin::Soon));
        }
        if joined.error_code != 0 {
            return Err(self.verdict("JoinGroup", joined.error_code));
        }
        self.member_id = joined.member_id.to_string();
        self.generation = joined.generation_id;
        let leader = joined.leader.as_str() == joined.member_id.as_str();
        let assignments = if leader {
            let members: BTreeMap<String, bytes::Bytes> = joined
                .members
                .iter()
                .map(|m| (m.member_id.to_string(), m.metadata.clone()))
                .collect();
            let split = assignor::assign(self.config.slots, &self.config.fingerprint, &members);
            for (id, a) in split.iter().filter(|(_, a)| !a.refused.is_empty()) {
                tracing::warn!(group = %self.config.group, member = %id, reason = %a.refused, "a scale-out member gets no work");
            }
            tracing::info!(group = %self.config.group, generation = self.generation, members = members.len(), "leading the scale-out group: slots assigned");
            split
                .into_iter()
                .map(|(id, a)| {
                    SyncGroupRequestAssignment::default()
                        .with_member_id(StrBytes::from_string(id))
                        .with_assignment(a.encode())
                })
                .collect()
        } else {
            Vec::new()
        };
        let sync = SyncGroupRequest::default()
            .with_group_id(self.group_id())
            .with_generation_id(self.generation)
            .with_member_id(StrBytes::from_string(self.member_id.clone()))
            .with_group_instance_id(self.instance_id())
            .with_protocol_type(Some(StrBytes::from_static_str(PROTOCOL_TYPE)))
            .with_protocol_name(Some(StrBytes::from_static_str(PROTOCOL_NAME)))
            .with_assignments(assignments);
        let sent = Instant::now();
        let synced = match conn.send(&sync).await {
            Ok(r) => r,
            Err(e) => return Err(self.io(e)),
        };
        if synced.error_code != 0 {
            return Err(self.verdict("SyncGroup", synced.error_code));
        }
        self.in_good_standing(sent);
        let assignment = Assignment::decode(&synced.assignment).unwrap_or_else(|| Assignment {
            slots: BTreeSet::new(),
            refused: "the leader's assignment bytes are of another version".to_string(),
        });
        if assignment.refused != self.refused {
            if !assignment.refused.is_empty() {
                tracing::warn!(group = %self.config.group, reason = %assignment.refused, "this member gets no work from the scale-out group's leader");
            }
            self.refused = assignment.refused.clone();
        }
        let gained: BTreeSet<u32> = assignment.slots.difference(&self.owned).copied().collect();
        let revoked: BTreeSet<u32> = self.owned.difference(&assignment.slots).copied().collect();
        tracing::info!(group = %self.config.group, generation = self.generation, member = %self.member_id, leader, slots = assignment.slots.len(), gained = gained.len(), revoked = revoked.len(), "scale-out group joined");
        if !gained.is_empty() {
            self.owned.extend(gained.iter().copied());
            let _ = self.changes.send(Change::Acquired(gained));
        }
        if !revoked.is_empty() {
            let (done, handed) = oneshot::channel();
            let _ = self.changes.send(Change::Revoked {
                slots: revoked.clone(),
                done,
            });
            // Heartbeats go on while the flow drains: a long drain must not cost the
            // member its place (and its other slots).
            self.heartbeat_until(handed).await;
            for slot in &revoked {
                self.owned.remove(slot);
            }
            tracing::info!(group = %self.config.group, slots = revoked.len(), "slots handed over");
            return Err(Ok(Rejoin::Soon));
        }
        Err(self.heartbeats().await)
    }

    /// An I/O failure talking to the coordinator: find it again.
    fn io(&mut self, e: KafkaError) -> RoundEnd {
        tracing::warn!(group = %self.config.group, error = %e, "the scale-out group's coordinator did not answer; joining again");
        self.conn = None;
        Ok(Rejoin::Soon)
    }

    async fn heartbeat(&mut self) -> Result<(), RoundEnd> {
        let conn = self.coordinator().await?;
        let request = HeartbeatRequest::default()
            .with_group_id(self.group_id())
            .with_generation_id(self.generation)
            .with_member_id(StrBytes::from_string(self.member_id.clone()))
            .with_group_instance_id(self.instance_id());
        let sent = Instant::now();
        match conn.send(&request).await {
            Ok(r) if r.error_code == 0 => {
                self.in_good_standing(sent);
                Ok(())
            }
            Ok(r) => {
                self.last_answer = sent;
                Err(self.verdict("Heartbeat", r.error_code))
            }
            Err(e) => Err(self.io(e)),
        }
    }

    /// Heartbeats while the group is stable; returns why to join again. A coordinator that
    /// cannot be reached keeps being tried; meanwhile the lease runs out (the engine then
    /// writes nothing, said once here), and the coordinator's answer once it is back tells
    /// whether the slots are still this member's (they are, and writing goes on, nothing
    /// repeated) or not ([`Rejoin::Reset`]: they are dropped without a commit).
    async fn heartbeats(&mut self) -> RoundEnd {
        let mut paused = false;
        loop {
            tokio::time::sleep(self.heartbeat_interval()).await;
            // A coordinator that cannot be found or does not answer is given up on after an
            // interval, and tried again.
            let beat = tokio::time::timeout(self.heartbeat_interval(), self.heartbeat()).await;
            let beat = beat.unwrap_or_else(|_| {
                self.conn = None;
                Err(Ok(Rejoin::Soon))
            });
            match beat {
                Ok(()) => {
                    if std::mem::take(&mut paused) {
                        tracing::info!(group = %self.config.group, "the group coordinator answers again and this member keeps its slots: writing goes on");
                    }
                }
                Err(Ok(Rejoin::Soon)) if self.conn.is_none() => {
                    if !paused && !self.lease.holds() && !self.owned.is_empty() {
                        paused = true;
                        tracing::warn!(group = %self.config.group, slots = self.owned.len(), "no answer from the scale-out group's coordinator for most of the session timeout: writing paused until it answers (its slots may be given to another process meanwhile)");
                    }
                }
                Err(end) => return end,
            }
        }
    }

    /// Heartbeats until `handed` is answered; their answers only matter afterwards (the
    /// member joins again anyway).
    async fn heartbeat_until(&mut self, mut handed: oneshot::Receiver<()>) {
        loop {
            tokio::select! {
                _ = &mut handed => return,
                () = tokio::time::sleep(self.heartbeat_interval()) => {
                    let _ = self.heartbeat().await;
                }
            }
        }
    }

    /// Stops every slot at once, committing nothing more, and waits until the flow did.
    async fn lose(&mut self, why: &str) {
        if self.owned.is_empty() {
            return;
        }
        let slots = std::mem::take(&mut self.owned);
        tracing::warn!(group = %self.config.group, slots = slots.len(), reason = why, "scale-out slots lost: stopped without a hand-over; joining the group again");
        let (done, stopped) = oneshot::channel();
        let _ = self.changes.send(Change::Lost { slots, done });
        let _ = stopped.await;
    }

    /// Leaves the group at a graceful stop (the flow has drained and committed by now), so
    /// that the others take the slots at once. A static member stays: its restart within
    /// the session timeout finds its slots waiting.
    async fn leave(&mut self) {
        if self.member_id.is_empty() || self.config.instance_id.is_some() {
            return;
        }
        let Ok(conn) = self.coordinator().await else {
            return;
        };
        let id = StrBytes::from_string(self.member_id.clone());
        let request = LeaveGroupRequest::default().with_group_id(self.group_id());
        // v3+ (KIP-345) names a list of members; earlier versions the one member id.
        let request = match conn.version::<LeaveGroupRequest>() {
            Some(v) if v >= 3 => request.with_members(vec![MemberIdentity::default()
                .with_member_id(id)
                .with_reason((v >= 5).then(|| StrBytes::from_static_str("strait stopped")))]),
            _ => request.with_member_id(id),
        };
        match conn.send(&request).await {
            Ok(r) if r.error_code == 0 => {
                tracing::info!(group = %self.config.group, member = %self.member_id, "left the scale-out group");
            }
            Ok(r) => {
                tracing::warn!(group = %self.config.group, code = r.error_code, "LeaveGroup refused; the group notices after the session timeout");
            }
            Err(e) => {
                tracing::warn!(group = %self.config.group, error = %e, "LeaveGroup failed; the group notices after the session timeout");
            }
        }
    }
}
