//! What an operator watches a running strait by: [`metrics`] (Prometheus series under
//! MM2's names and strait's own), [`health`] (liveness and readiness per flow), and
//! [`serve`], the HTTP listener (`--metrics-listen`) that answers `/metrics`, `/healthz`
//! and `/readyz`.

pub mod health;
pub mod metrics;

use std::convert::Infallible;
use std::sync::Arc;

use bytes::Bytes;
use http_body_util::Full;
use hyper::body::Incoming;
use hyper::{Method, Request, Response, StatusCode};
use hyper_util::rt::TokioIo;
use tokio::net::TcpListener;
use tokio_util::sync::CancellationToken;

pub use health::{EngineHealth, FlowHealth, Health};
pub use metrics::{FlowMetrics, Metrics, PartitionMetrics, PartitionState};

/// The process's metrics and health, shared by every flow and the HTTP listener.
#[derive(Default)]
pub struct Telemetry {
    pub metrics: Arc<Metrics>,
    pub health: Health,
}

/// Answers HTTP requests on `listener` until `shutdown`: `GET /metrics` (OpenMetrics
/// text), `GET /healthz` and `GET /readyz` (200 or 503, with a JSON body that says why).
pub async fn serve(listener: TcpListener, telemetry: Arc<Telemetry>, shutdown: CancellationToken) {
    loop {
        let stream = tokio::select! {
            _ = shutdown.cancelled() => return,
            accepted = listener.accept() => match accepted {
                Ok((stream, _)) => stream,
                Err(e) => {
                    tracing::debug!(error = %e, "metrics listener: accept failed");
                    continue;
                }
            },
        };
        let telemetry = telemetry.clone();
        tokio::spawn(async move {
            let service = hyper::service::service_fn(move |req| {
                let telemetry = telemetry.clone();
                async move { Ok::<_, Infallible>(answer(&req, &telemetry)) }
            });
            let conn = hyper::server::conn::http1::Builder::new()
                .serve_connection(TokioIo::new(stream), service);
            if let Err(e) = conn.await {
                tracing::debug!(error = %e, "metrics listener: connection ended");
            }
        });
    }
}

fn answer(req: &Request<Incoming>, telemetry: &Telemetry) -> Response<Full<Bytes>> {
    let reply = |status: StatusCode, content_type: &str, body: String| {
        Response::builder()
            .status(status)
            .header("content-type", content_type)
            .body(Full::new(Bytes::from(body)))
            .unwrap_or_default()
    };
    let probe = |report: health::Report| {
        let status = match report.ok {
            true => StatusCode::OK,
            false => StatusCode::SERVICE_UNAVAILABLE,
        };
        reply(status, "application/json", report.body)
    };
    if req.method() != Method::GET {
        return reply(
            StatusCode::METHOD_NOT_ALLOWED,
            "text/plain",
            "GET only\n".into(),
        );
    }
    match req.uri().path() {
        "/metrics" => reply(
            StatusCode::OK,
            "application/openmetrics-text; version=1.0.0; charset=utf-8",
            telemetry.metrics.encode(),
        ),
        "/healthz" => probe(telemetry.health.live()),
        "/readyz" => probe(telemetry.health.ready()),
        _ => reply(
            StatusCode::NOT_FOUND,
            "text/plain",
            "not found: /metrics, /healthz and /readyz are served\n".into(),
        ),
    }
}
