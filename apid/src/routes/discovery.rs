//! `GET /neighbors` (and `/api/neighbors`) and `GET /api/services`: the
//! service registry ([`crate::registry`]) in the original's shapes.

use axum::Json;
use serde::{Deserialize, Serialize};
use serde_json::{Map, Value};

use crate::registry::Neighbor;
use crate::state::State;
use metacore::socket::body::QueryParams;

#[derive(Debug, Default, Deserialize)]
pub(crate) struct NeighborsQuery {
    all: Option<String>,
}

/// `{current, enabled, neighbors, count, self}`.
#[derive(Debug, Serialize)]
pub(crate) struct Neighbors {
    current: String,
    enabled: bool,
    neighbors: Vec<Neighbor>,
    count: usize,
    /// `null` until meta-core's own file is listed.
    #[serde(rename = "self")]
    me: Option<Neighbor>,
}

async fn entries(st: &State) -> Vec<crate::registry::Entry> {
    st.registry.listing().await
}

/// The other services, one row per name (its newest instance) unless
/// `?all=1`; this meta-core is `self`.
pub(super) async fn neighbors(
    st: State,
    QueryParams(q): QueryParams<NeighborsQuery>,
) -> Json<Neighbors> {
    let all = matches!(q.all.as_deref(), Some("1" | "true"));
    let own = st.registry.own_file_name();
    let list = entries(&st).await;
    let me = list.iter().find(|e| e.file == own).map(|e| e.neighbor());
    let mut names = std::collections::HashSet::new();
    let neighbors: Vec<Neighbor> = list
        .iter()
        .filter(|e| e.file != own)
        .filter(|e| all || names.insert(e.name.clone()))
        .map(|e| e.neighbor())
        .collect();
    Json(Neighbors {
        current: st.registry.name().to_owned(),
        enabled: true,
        count: neighbors.len(),
        neighbors,
        me,
    })
}

/// `{services: [...], count}`: every registry entry as its file has it,
/// `status` `stale` past `STALE_THRESHOLD_MS`, newest heartbeat first.
#[derive(Debug, Serialize)]
pub(crate) struct Services {
    services: Vec<Map<String, Value>>,
    count: usize,
}

pub(super) async fn services(st: State) -> Json<Services> {
    let services: Vec<Map<String, Value>> =
        entries(&st).await.iter().map(|e| e.service()).collect();
    Json(Services {
        count: services.len(),
        services,
    })
}
