//! Whether strait is alive and whether it replicates, per flow, as `/healthz` and `/readyz`
//! answer it: a flow is alive until one of its tasks ends (the process then drains and
//! exits); it is ready once started, while both clusters answer and every partition is
//! replicating or explicitly stopped.

use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use serde_json::json;

/// The flows of the process.
#[derive(Default)]
pub struct Health {
    flows: Mutex<Vec<Arc<FlowHealth>>>,
}

/// An answer to a probe: whether it passes, and a JSON body that says why.
pub struct Report {
    pub ok: bool,
    pub body: String,
}

impl Health {
    /// Registers flow `name`; `source_timeout` and `target_timeout` are its clusters'
    /// `request.timeout.ms`: a cluster failing for longer makes the flow not ready.
    pub fn flow(
        &self,
        name: &str,
        source_timeout: Duration,
        target_timeout: Duration,
    ) -> Arc<FlowHealth> {
        let flow = Arc::new(FlowHealth {
            name: name.to_string(),
            source_timeout,
            target_timeout,
            state: Mutex::default(),
        });
        self.flows.lock().unwrap().push(flow.clone());
        flow
    }

    /// Liveness: every task of every flow runs.
    pub fn live(&self) -> Report {
        self.report(|f| {
            let s = f.state.lock().unwrap();
            match &s.failed {
                Some(reason) => Err(reason.clone()),
                None => Ok(()),
            }
        })
    }

    /// Readiness: every flow started, reaches both clusters, and has no partition paused.
    pub fn ready(&self) -> Report {
        let now = Instant::now();
        self.report(|f| f.unready(now).map_or(Ok(()), Err))
    }

    fn report(&self, judge: impl Fn(&FlowHealth) -> Result<(), String>) -> Report {
        let flows = self.flows.lock().unwrap();
        let mut ok = true;
        let each: Vec<_> = flows
            .iter()
            .map(|f| {
                let s = f.state.lock().unwrap().clone();
                let verdict = judge(f);
                ok &= verdict.is_ok();
                json!({
                    "flow": f.name,
                    "ok": verdict.is_ok(),
                    "reason": verdict.err(),
                    "started": s.started,
                    "paused_partitions": s.paused,
                    "stopped_partitions": s.stopped,
                })
            })
            .collect();
        let body = json!({ "status": if ok { "ok" } else { "failing" }, "flows": each });
        Report {
            ok,
            body: body.to_string(),
        }
    }
}

/// One flow's health, written by its control loop and its produce engine.
pub struct FlowHealth {
    name: String,
    source_timeout: Duration,
    target_timeout: Duration,
    state: Mutex<FlowState>,
}

#[derive(Clone, Default)]
struct FlowState {
    started: bool,
    /// Why a task of the flow ended, if one did.
    failed: Option<String>,
    /// Since when batches have waited for the target with nothing acknowledged.
    target_waiting_since: Option<Instant>,
    /// Since when reading the source has been failing.
    source_failing_since: Option<Instant>,
    paused: usize,
    stopped: usize,
}

/// What the produce engine knows of the flow's health, at each of its commit ticks.
#[derive(Clone, Copy, Debug, Default)]
pub struct EngineHealth {
    pub target_waiting_since: Option<Instant>,
    pub source_failing_since: Option<Instant>,
    /// Partitions the target refuses for now (fetching them waits).
    pub paused: usize,
    /// Partitions given up on an error.
    pub stopped: usize,
}

impl FlowHealth {
    /// The flow restored its progress and its engines run.
    pub fn started(&self) {
        self.state.lock().unwrap().started = true;
    }

    /// A task of the flow ended (`reason`): the flow is not alive any more.
    pub fn failed(&self, reason: String) {
        self.state.lock().unwrap().failed.get_or_insert(reason);
    }

    pub fn engine(&self, e: EngineHealth) {
        let mut s = self.state.lock().unwrap();
        s.target_waiting_since = e.target_waiting_since;
        s.source_failing_since = e.source_failing_since;
        s.paused = e.paused;
        s.stopped = e.stopped;
    }

    /// Why the flow is not ready at `now`, if it is not.
    fn unready(&self, now: Instant) -> Option<String> {
        let s = self.state.lock().unwrap();
        let past = |since: Option<Instant>, limit: Duration| {
            since
                .map(|t| now.saturating_duration_since(t))
                .filter(|d| *d > limit)
        };
        if let Some(reason) = &s.failed {
            Some(format!("failed: {reason}"))
        } else if !s.started {
            Some("starting: restoring progress and discovering topics".to_string())
        } else if let Some(d) = past(s.target_waiting_since, self.target_timeout) {
            Some(format!(
                "target: batches have waited {} ms with nothing acknowledged (request.timeout.ms {})",
                d.as_millis(),
                self.target_timeout.as_millis()
            ))
        } else if let Some(d) = past(s.source_failing_since, self.source_timeout) {
            Some(format!(
                "source: fetching has failed for {} ms (request.timeout.ms {})",
                d.as_millis(),
                self.source_timeout.as_millis()
            ))
        } else if s.paused > 0 {
            Some(format!(
                "{} partition(s) paused: the target refuses them for now",
                s.paused
            ))
        } else {
            None
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_flow_is_ready_once_started_and_while_its_clusters_answer() {
        let health = Health::default();
        let timeout = Duration::from_secs(30);
        let flow = health.flow("a->b", timeout, timeout);
        assert!(health.live().ok);
        assert!(!health.ready().ok, "starting");
        flow.started();
        assert!(health.ready().ok);
        let long_ago = Instant::now().checked_sub(Duration::from_secs(31));
        flow.engine(EngineHealth {
            target_waiting_since: long_ago,
            ..EngineHealth::default()
        });
        let report = health.ready();
        assert!(!report.ok);
        assert!(
            report.body.contains("target: batches have waited"),
            "{}",
            report.body
        );
        // Waiting for less than the request timeout is ordinary.
        flow.engine(EngineHealth {
            target_waiting_since: Some(Instant::now()),
            stopped: 1,
            ..EngineHealth::default()
        });
        assert!(
            health.ready().ok,
            "an explicitly stopped partition keeps it ready"
        );
        flow.failed("the produce engine panicked: boom".to_string());
        let (live, ready) = (health.live(), health.ready());
        assert!(!live.ok && !ready.ok);
        assert!(live.body.contains("panicked: boom"), "{}", live.body);
    }
}
