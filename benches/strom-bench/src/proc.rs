//! A broker's cost, read from /proc/<pid> of its process (Linux): CPU seconds (user + system)
//! and resident memory. Sampled around each workload by the bench, so it needs no agent in
//! the broker and works the same for Strom, a JVM and anything else.

pub struct ProcSample {
    pub cpu_seconds: f64,
    /// Resident memory, file-backed pages included: for a broker that reads its segments
    /// through mmap (Strom) that counts the page cache it has touched, which the kernel
    /// reclaims under pressure.
    pub rss_bytes: u64,
    /// Resident anonymous memory (`RssAnon` of /proc/<pid>/status): heap, buffers, the JVM's
    /// heap; what the process itself holds.
    pub rss_anon_bytes: Option<u64>,
}

pub fn sample(pid: u32) -> Option<ProcSample> {
    let stat = std::fs::read_to_string(format!("/proc/{pid}/stat")).ok()?;
    // The command name may contain spaces: fields are counted after its closing ')'.
    let rest = stat.rsplit_once(')')?.1;
    let f: Vec<&str> = rest.split_whitespace().collect();
    // SAFETY: sysconf only reads a configuration value.
    let (ticks, page) = unsafe {
        (
            libc::sysconf(libc::_SC_CLK_TCK),
            libc::sysconf(libc::_SC_PAGESIZE),
        )
    };
    // utime and stime are stat fields 14 and 15 (1-based); here 11 and 12 after the ')'.
    let utime: f64 = f.get(11)?.parse().ok()?;
    let stime: f64 = f.get(12)?.parse().ok()?;
    // rss (pages) is stat field 24: index 21 here.
    let rss: u64 = f.get(21)?.parse().ok()?;
    let rss_anon_bytes = std::fs::read_to_string(format!("/proc/{pid}/status"))
        .ok()
        .and_then(|st| {
            st.lines()
                .find_map(|l| l.strip_prefix("RssAnon:"))
                .and_then(|v| v.trim().trim_end_matches("kB").trim().parse::<u64>().ok())
        })
        .map(|kb| kb * 1024);
    Some(ProcSample {
        cpu_seconds: (utime + stime) / ticks.max(1) as f64,
        rss_bytes: rss * page.max(1) as u64,
        rss_anon_bytes,
    })
}

/// The sum over several processes (the nodes of a cluster on one machine): CPU seconds and
/// memory of the whole cluster, so one CPU-per-GB figure compares it with another cluster.
/// `None` when any of them cannot be read (a node that died makes the sum meaningless).
pub fn sample_all(pids: &[u32]) -> Option<ProcSample> {
    if pids.is_empty() {
        return None;
    }
    let mut sum = ProcSample {
        cpu_seconds: 0.0,
        rss_bytes: 0,
        rss_anon_bytes: Some(0),
    };
    for &pid in pids {
        let s = sample(pid)?;
        sum.cpu_seconds += s.cpu_seconds;
        sum.rss_bytes += s.rss_bytes;
        sum.rss_anon_bytes = sum.rss_anon_bytes.zip(s.rss_anon_bytes).map(|(a, b)| a + b);
    }
    Some(sum)
}

/// Total CPU seconds of a process and its children threads are included in its stat already;
/// for a broker started through a wrapper script (kafka.sh execs java, so the PID is the
/// JVM's) nothing more is needed.
pub fn describe_machine() -> String {
    let cpu = std::fs::read_to_string("/proc/cpuinfo")
        .ok()
        .and_then(|c| {
            c.lines()
                .find(|l| l.starts_with("model name"))
                .and_then(|l| l.split_once(':'))
                .map(|(_, v)| v.trim().to_string())
        })
        .unwrap_or_else(|| "unknown CPU".into());
    let cores = std::thread::available_parallelism()
        .map(|n| n.get())
        .unwrap_or(1);
    let mem_gib = std::fs::read_to_string("/proc/meminfo")
        .ok()
        .and_then(|m| {
            m.lines()
                .find(|l| l.starts_with("MemTotal:"))
                .and_then(|l| l.split_whitespace().nth(1))
                .and_then(|kb| kb.parse::<f64>().ok())
        })
        .map(|kb| kb / (1024.0 * 1024.0))
        .unwrap_or(0.0);
    let kernel = std::fs::read_to_string("/proc/sys/kernel/osrelease")
        .map(|s| s.trim().to_string())
        .unwrap_or_default();
    format!("{cpu}, {cores} cores available, {mem_gib:.0} GiB RAM, Linux {kernel}")
}
