//! Phase 3: followers of the snapshot that never read, and what apid holds
//! for them until its write stall cuts them off.

use std::time::{Duration, Instant};

use bench::workload::rss_mib;

/// Phase 3: followers of the snapshot that never read.
pub(crate) async fn stalled(port: u16, apid_pid: u32, n: u64) {
    use tokio::io::{AsyncReadExt, AsyncWriteExt};
    let (_, before) = rss_mib(apid_pid);
    let mut conns = Vec::new();
    for _ in 0..n {
        let sock = tokio::net::TcpSocket::new_v4().unwrap();
        sock.set_recv_buffer_size(4096).unwrap();
        let mut tcp = sock
            .connect(([127, 0, 0, 1], port).into())
            .await
            .expect("connect to apid");
        tcp.write_all(b"GET /api/events/meta?lastEventId=0 HTTP/1.1\r\nHost: x\r\n\r\n")
            .await
            .unwrap();
        conns.push(tcp);
    }
    // The write stall (10 s) cuts them off once they have taken nothing for
    // that long; sample until then and a little after.
    let mut peak: f64 = 0.0;
    let until = Instant::now() + Duration::from_secs(25);
    while Instant::now() < until {
        peak = peak.max(rss_mib(apid_pid).1);
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
    let (_, after) = rss_mib(apid_pid);
    let mut closed = 0;
    for tcp in &mut conns {
        // A cut-off connection reads its buffered bytes, then EOF or reset.
        let mut buf = vec![0u8; 1 << 16];
        loop {
            match tokio::time::timeout(Duration::from_millis(20), tcp.read(&mut buf)).await {
                Ok(Ok(0)) | Ok(Err(_)) => {
                    closed += 1;
                    break;
                }
                Ok(Ok(_)) => continue,
                Err(_) => break,
            }
        }
    }
    println!();
    println!("stalled: {n} followers of the snapshot that never read");
    println!(
        "  apid RSS: before {before:.1} MiB, peak {peak:.1} MiB (+{:.1} MiB, {:.0} KiB a follower), \
         after {after:.1} MiB; {closed} of {n} cut off   (the outside attack: 193 MB -> 1,136 MB \
         for 2,000, about 480 KiB a follower)",
        peak - before,
        (peak - before) * 1024.0 / n as f64
    );
}
