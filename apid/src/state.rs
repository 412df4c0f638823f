//! What every handler shares: the configuration, the admin access, the
//! clients of the other daemons, the advertised URLs, the start time, and
//! the services that live as long as apid (the stats sweep, the SSE hubs,
//! the registry, WebDAV's shared state, the resolved roots, the request
//! metrics). Each service is defined in a module of its own that imports
//! nothing of this one; handlers that need one service alone take it by
//! `FromRef`.

use std::sync::Arc;
use std::time::Instant;

use axum::extract::FromRef;
use metacore::Config;
use metacore::admin::AdminAccess;
use metacore::api::storaged::StoragedClient;
use metacore::api::supervisor::SupervisorClient;
use metacore::layout::Daemon;
use metacore::shutdown::Shutdown;

use crate::events::hubs::Events;
use crate::sweep::Sweeper;
use crate::urls::Urls;

#[derive(Debug)]
pub struct AppState {
    pub config: Config,
    /// Who may call the admin routes ([`metacore::admin`]), resolved once
    /// at start.
    pub admin: AdminAccess,
    /// storaged's socket; connections are pooled and re-made after a
    /// storaged restart, so nothing here needs resetting.
    pub store: StoragedClient,
    /// watcherd's socket: the watchers API is relayed to it.
    pub watcherd: metacore::api::watcherd::WatcherdClient,
    /// mountd's socket: the mounts API is relayed to it.
    pub mountd: metacore::api::mountd::MountdClient,
    /// The supervisor's control socket, for the daemon table in `/status`.
    pub supervisor: SupervisorClient,
    pub urls: Urls,
    pub started: Instant,
    /// The `/api/stats` background sweep of file counts and sizes.
    pub(crate) sweeper: Sweeper,
    /// The SSE hubs and follower slots.
    pub(crate) events: Events,
    /// The service registry (`services/*.json`) and this meta-core's file.
    pub(crate) registry: std::sync::Arc<crate::registry::Registry>,
    /// WebDAV at `/webdav`: its locks and upload slots.
    pub(crate) dav: crate::dav::shared::Dav,
    /// `FILES_PATH` and `META_CORE_PATH` resolved, for confinement.
    pub(crate) roots: crate::confine::RootsCache,
    /// The requests counted for `/metrics` ([`crate::metrics`]).
    pub(crate) requests: std::sync::Arc<crate::metrics::Requests>,
}

impl AppState {
    pub fn new(config: Config, admin: AdminAccess, shutdown: Shutdown) -> Self {
        let store = StoragedClient::new(&config.layout().socket(Daemon::Storaged));
        let supervisor = SupervisorClient::new(&config.layout().supervisor_socket());
        let watcherd =
            metacore::api::watcherd::WatcherdClient::new(&config.layout().socket(Daemon::Watcherd));
        let mountd =
            metacore::api::mountd::MountdClient::new(&config.layout().socket(Daemon::Mountd));
        let urls = Urls::from_config(&config);
        let sweeper = Sweeper::new(store.clone());
        Self {
            admin,
            watcherd,
            mountd,
            registry: std::sync::Arc::new(crate::registry::Registry::new(&config, &urls)),
            events: Events::new(&config, store.clone(), shutdown),
            urls,
            store,
            supervisor,
            config,
            started: Instant::now(),
            sweeper,
            dav: crate::dav::shared::Dav::default(),
            roots: crate::confine::RootsCache::default(),
            requests: Default::default(),
        }
    }
}

/// The state extractor of the handlers that take all of it.
pub(crate) type State = axum::extract::State<std::sync::Arc<AppState>>;

/// The SSE handlers take the event streams alone.
impl FromRef<Arc<AppState>> for Events {
    fn from_ref(st: &Arc<AppState>) -> Self {
        st.events.clone()
    }
}
