//! The one call apid makes below what its crates wrap: the kernel's count
//! of bytes a peer has not acknowledged, which no safe API gives. Kept
//! here, apart, so that the crate's only `unsafe` is one small function.

use tokio::net::TcpStream;

/// Bytes in the socket's send queue not yet acknowledged by the peer
/// (`SIOCOUTQ`); `None` if the kernel does not say.
#[allow(unsafe_code)]
pub(crate) fn unacked(stream: &TcpStream) -> Option<u32> {
    use std::os::fd::AsRawFd;
    let mut queued: libc::c_int = 0;
    // SAFETY: SIOCOUTQ writes one int through the pointer, which points to
    // a live c_int; the descriptor is the stream's own, open for the call.
    // (On Linux SIOCOUTQ is TIOCOUTQ.)
    let r = unsafe { libc::ioctl(stream.as_raw_fd(), libc::TIOCOUTQ, &mut queued) };
    (r == 0).then(|| queued.max(0) as u32)
}
