// SPDX-License-Identifier: GPL-2.0
/*
 * Static init for the slab bulk harness.
 *
 * Reads its orders from the kernel command line:
 *   harness.load=mod1,mod2   load /lib/modules/<mod>.ko in this order, passing
 *                            every "<mod>.<param>=<value>" from the command
 *                            line as module parameters
 *   harness.unload=1         remove the modules again (in reverse order)
 *   harness.nokfence=mod1,.. KFENCE sampling off (kfence.sample_interval=0)
 *                            while each of these modules loads, its interval
 *                            restored after: for tests that corrupt memory
 *                            around an object they expect in a slab page
 *   harness.cgroup=NAME      move this process into the cgroup v2 group NAME,
 *                            memory controller on, before loading: what the
 *                            modules charge from this task goes to a non-root
 *                            memcg
 *   harness.write=path:value (may repeat) write value to path before loading,
 *                            e.g. debugfs knobs; "%20" in value stands for
 *                            a space (pktgen's commands have them)
 *   harness.udp=COUNT:SIZE[,SIZE...]
 *                            after loading, for each SIZE: COUNT UDP datagrams
 *                            of SIZE payload bytes from one socket to another
 *                            on 127.0.0.1, each received before the next is
 *                            sent; prints the TSC ticks the COUNT pairs took
 *                            ("harness: udp size=S count=C tsc=T")
 *   harness.callers=NAME:COUNT[,NAME:COUNT...]
 *                            after the udp runs, each workload of the bulk
 *                            API's callers in the kernel, COUNT units timed
 *                            with the TSC after a few untimed ones and half
 *                            a second of idle guest time; prints
 *                            "harness: callers name=N count=C tsc=T".  The
 *                            workloads (see callers_runs() below):
 *                              mmap      one page mapped and unmapped in a
 *                                        gap among 256 mappings (the
 *                                        maple tree); unit: the pair
 *                              mprotect  a page of a 3-page mapping made
 *                                        read-only and writable again (a
 *                                        split and a merge); unit: the pair
 *                              brk       the heap grown by a page and shrunk
 *                                        back; unit: the pair
 *                              uring     io_uring NOPs, 256 per
 *                                        io_uring_enter(), on one ring;
 *                                        unit: a NOP (COUNT a multiple of 256)
 *                              uring-new the same with a new ring per 256
 *                                        NOPs: an empty request cache each
 *                                        time; unit: a NOP
 *                              kfree_rcu a sysfs attribute opened and closed
 *                                        (kfree_rcu() of its open node);
 *                                        unit: the pair
 *                              xdp       XDP_PASS frames from the BPF test
 *                                        run's live-frames mode on the
 *                                        loopback, 4096 per bpf() call (its
 *                                        sk_buffs allocated in bulk, 64 at
 *                                        a time), dropped by IP as not for
 *                                        this host; unit: a frame (COUNT a
 *                                        multiple of 4096)
 *                              qdisc-one UDP frames sent on dummy0 through an
 *                                        AF_PACKET socket into a tbf qdisc
 *                                        that holds them (8 bytes/s) with a
 *                                        bfifo of 8 KiB: once it is full,
 *                                        every frame is dropped as a list of
 *                                        one; unit: a frame
 *                              qdisc-batch the same with fq_codel (limit 128)
 *                                        under the tbf: its drops come in
 *                                        lists of 64; unit: a frame
 *                              fq-gc     UDP datagrams, each to a new
 *                                        destination, through sch_fq on
 *                                        dummy0 that holds 65536 flows idle
 *                                        for 3.5 s: each new flow's lookup
 *                                        frees up to 8 old ones in bulk
 *                                        (fq_gc()); unit: a datagram
 *   harness.callers_snap=path
 *                            (may repeat) print the file's lines before and
 *                            after each timed callers loop, as "harness:
 *                            callers snap NAME before|after <path>: <line>"
 *                            (e.g. a hist trigger of a kprobe event)
 *   harness.cat=path         (may repeat) print the file's lines, each as
 *                            "harness: cat <path>: <line>", after loading
 *   harness.hog=MIB          memory pressure while the modules load: a child
 *                            process (in the root memcg: started after
 *                            harness.cgroup's group is made, before this
 *                            process joins it) writes MIB of anonymous memory
 *                            a MiB at a time and gives each MiB up with
 *                            MADV_FREE, over and over, from before the
 *                            modules load (the init waits for its first
 *                            pass, then prints /proc/vmstat as "harness:
 *                            hog start /proc/vmstat: <line>") until they
 *                            are loaded, then killed.  Reclaim can drop
 *                            nearly all those pages (no swap needed):
 *                            with MIB at least the guest's memory, free
 *                            memory stays near the watermarks, and no OOM
 *                            kill is needed as long as the rest fits
 * then prints "harness: tainted=T" (/proc/sys/kernel/tainted) and
 * "harness: status=N" and ends QEMU through isa-debug-exit
 * (exit code (N << 1) | 1).  Falls back to reboot() (QEMU runs -no-reboot).
 *
 * Also built for arm64 (aarch64-linux-gnu-gcc -static): there the clock it
 * calls the TSC is the generic timer's virtual counter (CNTVCT_EL0, which
 * the kernel lets user space read), and the end is always reboot(), the
 * status read from the console.
 *
 * Built with -DHARNESS_SHELL (./bulk boot --shell, which also packs a static
 * busybox), it runs /bin/sh on the console once the modules are loaded and
 * ends QEMU when the shell exits.  Without it, no shell: what a measured
 * boot runs is what its command line asks for.
 */
#define _GNU_SOURCE
#include <errno.h>
#include <stdarg.h>
#include <fcntl.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <arpa/inet.h>
#include <linux/bpf.h>
#include <linux/if_ether.h>
#include <linux/if_packet.h>
#include <linux/io_uring.h>
#include <linux/pkt_sched.h>
#include <linux/rtnetlink.h>
#include <net/if.h>
#include <netinet/in.h>
#if defined(__x86_64__) || defined(__i386__)
#include <sys/io.h>
#define HAVE_EXIT_PORT 1
#endif
#include <sys/ioctl.h>
#include <sys/mman.h>
#include <sys/mount.h>
#include <sys/reboot.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/syscall.h>
#include <sys/time.h>
#include <sys/wait.h>
#include <termios.h>
#include <time.h>
#include <unistd.h>

#define MAX_MODS 16
#define CMDLINE_MAX 4096
#define EXIT_PORT 0xf4

static char cmdline[CMDLINE_MAX];

static void __attribute__((format(printf, 1, 2))) say(const char *fmt, ...)
{
	va_list ap;

	va_start(ap, fmt);
	printf("harness: ");
	vprintf(fmt, ap);
	printf("\n");
	va_end(ap);
	fflush(stdout);
}

/*
 * The first line of a small file (a sysfs or /proc value) into @buf,
 * without its newline: its length, or -1 with errno set (0 for an empty
 * file).
 */
static ssize_t read_line(const char *path, char *buf, size_t len)
{
	int fd = open(path, O_RDONLY);
	ssize_t n = fd >= 0 ? read(fd, buf, len - 1) : -1;
	int err = errno;

	if (fd >= 0)
		close(fd);
	buf[n > 0 ? n : 0] = '\0';
	if (n <= 0) {
		errno = n < 0 ? err : 0;
		return -1;
	}
	buf[strcspn(buf, "\n")] = '\0';
	return strlen(buf);
}

/*
 * The kernel's taint flags (/proc/sys/kernel/tainted) as the last word
 * before the status: the harness checks them (boot.py, taint_problem()).
 */
static void print_taint(void)
{
	char buf[32];

	printf("harness: tainted=%s\n",
	       read_line("/proc/sys/kernel/tainted", buf, sizeof(buf)) > 0 ?
	       buf : "unknown");
}

static void finish(int status)
{
	print_taint();
	printf("harness: status=%d\n", status);
	fflush(stdout);
	/*
	 * The console's UART sends what the tty holds after write() returned:
	 * ending QEMU before it is sent loses the output's tail (a small run's
	 * last /proc/vmstat lines and the status were once lost so).
	 */
	tcdrain(STDOUT_FILENO);
	sync();
#ifdef HAVE_EXIT_PORT
	if (ioperm(EXIT_PORT, 1, 1) == 0)
		outb((unsigned char)status, EXIT_PORT);
#endif
	reboot(RB_AUTOBOOT);
	for (;;)
		pause();
}

static void read_cmdline(void)
{
	int fd = open("/proc/cmdline", O_RDONLY);
	ssize_t n;

	if (fd < 0) {
		say("cannot open /proc/cmdline: %s", strerror(errno));
		finish(2);
	}
	n = read(fd, cmdline, sizeof(cmdline) - 1);
	close(fd);
	if (n < 0)
		n = 0;
	cmdline[n] = '\0';
	if (n && cmdline[n - 1] == '\n')
		cmdline[n - 1] = '\0';
}

/* Value of "key=" in the command line, copied into buf; NULL if absent. */
static const char *param(const char *key, char *buf, size_t len, const char **from)
{
	const char *p = from && *from ? *from : cmdline;
	size_t klen = strlen(key);

	while ((p = strstr(p, key))) {
		if ((p == cmdline || p[-1] == ' ') && p[klen] == '=') {
			const char *v = p + klen + 1;
			size_t n = strcspn(v, " ");

			if (n >= len)
				n = len - 1;
			memcpy(buf, v, n);
			buf[n] = '\0';
			if (from)
				*from = v + n;
			return buf;
		}
		p += klen;
	}
	return NULL;
}

/* All "<mod>.x=y" words of the command line, as "x=y x=y". */
static void module_params(const char *mod, char *buf, size_t len)
{
	size_t mlen = strlen(mod), used = 0;
	const char *p = cmdline;

	buf[0] = '\0';
	while (*p) {
		size_t n = strcspn(p, " ");

		if (n > mlen + 1 && !strncmp(p, mod, mlen) && p[mlen] == '.' &&
		    used + n - mlen + 1 < len) {
			if (used)
				buf[used++] = ' ';
			memcpy(buf + used, p + mlen + 1, n - mlen - 1);
			used += n - mlen - 1;
			buf[used] = '\0';
		}
		p += n;
		while (*p == ' ')
			p++;
	}
}

/*
 * Writes all of value, in as many write() calls as the file takes: some
 * take one word per call (ftrace's set_ftrace_filter, for one).
 */
static int write_file(const char *path, const char *value)
{
	int fd = open(path, O_WRONLY), ret = 0;
	size_t done = 0, len = strlen(value);

	while (fd >= 0 && done < len) {
		ssize_t n = write(fd, value + done, len - done);

		if (n <= 0)
			break;
		done += n;
	}
	if (fd < 0 || done < len) {
		say("write %s failed after %zu of %zu bytes: %s (%d)", path,
		    done, len, strerror(errno), errno);
		ret = 1;
	}
	if (fd >= 0)
		close(fd);
	return ret;
}

#define KFENCE_INTERVAL "/sys/module/kfence/parameters/sample_interval"

/* Whether mod is one of the comma-separated words of list. */
static int listed(const char *list, const char *mod)
{
	size_t n = strlen(mod);
	const char *p = list;

	while (*p) {
		size_t w = strcspn(p, ",");

		if (w == n && !strncmp(p, mod, n))
			return 1;
		p += w;
		if (*p == ',')
			p++;
	}
	return 0;
}

/*
 * Turns KFENCE's sampling off, saving the interval it had in old ("" when
 * there was nothing to turn off: no KFENCE, or sampling already off).
 * An unreadable knob is an error: the module would load with sampling on.
 * Writing 0 stops the sampling timer and makes every later allocation
 * miss KFENCE's pool; writing the old interval back re-enables it.
 */
static int kfence_off(char *old, size_t len)
{
	int fd = open(KFENCE_INTERVAL, O_RDONLY), err = errno;
	ssize_t n;

	old[0] = '\0';
	if (fd < 0) {
		if (err != ENOENT) {
			say("open %s failed: %s (%d)", KFENCE_INTERVAL,
			    strerror(err), err);
			return 1;
		}
		say("KFENCE sampling absent");
		return 0;
	}
	n = read(fd, old, len - 1);
	err = errno;
	close(fd);
	if (n <= 0) {
		say("read %s failed: %s (%d)", KFENCE_INTERVAL,
		    n < 0 ? strerror(err) : "empty", n < 0 ? err : 0);
		old[0] = '\0';
		return 1;
	}
	old[n] = '\0';
	old[strcspn(old, "\n")] = '\0';
	if (!strcmp(old, "0")) {
		say("KFENCE sampling already off");
		old[0] = '\0';
		return 0;
	}
	if (write_file(KFENCE_INTERVAL, "0")) {
		old[0] = '\0';
		return 1;
	}
	say("KFENCE sampling off (interval was %s ms)", old);
	return 0;
}

static int kfence_restore(const char *old)
{
	if (!old[0])
		return 0;
	if (write_file(KFENCE_INTERVAL, old))
		return 1;
	say("KFENCE sampling on again (interval %s ms)", old);
	return 0;
}

static int make_cgroup(const char *name)
{
	char path[256];

	if (mount("cgroup2", "/sys/fs/cgroup", "cgroup2", 0, NULL) != 0) {
		say("mount cgroup2 failed: %s (%d)", strerror(errno), errno);
		return 1;
	}
	if (write_file("/sys/fs/cgroup/cgroup.subtree_control", "+memory"))
		return 1;
	snprintf(path, sizeof(path), "/sys/fs/cgroup/%s", name);
	if (mkdir(path, 0755) != 0) {
		say("mkdir %s failed: %s (%d)", path, strerror(errno), errno);
		return 1;
	}
	return 0;
}

static int join_cgroup(const char *name)
{
	char path[256], pid[16];

	snprintf(path, sizeof(path), "/sys/fs/cgroup/%s/cgroup.procs", name);
	snprintf(pid, sizeof(pid), "%d", getpid());
	if (write_file(path, pid))
		return 1;
	say("joined cgroup %s", name);
	return 0;
}

/* "%20" -> ' ', in place: the command line splits words at spaces. */
static void unescape_spaces(char *s)
{
	char *out = s;

	while (*s) {
		if (!strncmp(s, "%20", 3)) {
			*out++ = ' ';
			s += 3;
		} else {
			*out++ = *s++;
		}
	}
	*out = '\0';
}

static int write_knobs(void)
{
	const char *from = NULL;
	char spec[512];
	int bad = 0;

	while (param("harness.write", spec, sizeof(spec), &from)) {
		char *colon = strchr(spec, ':');

		if (!colon) {
			say("bad harness.write '%s'", spec);
			bad = 1;
			continue;
		}
		*colon = '\0';
		unescape_spaces(colon + 1);
		if (write_file(spec, colon + 1))
			bad = 1;
		else
			say("wrote %s = %s", spec, colon + 1);
	}
	return bad;
}

/* Prints the file's lines as "harness: <what> <path>: <line>". */
static int print_file(const char *what, const char *path)
{
	char line[512];
	FILE *f = fopen(path, "r");

	if (!f) {
		say("%s %s failed: %s (%d)", what, path, strerror(errno), errno);
		return 1;
	}
	while (fgets(line, sizeof(line), f)) {
		line[strcspn(line, "\n")] = '\0';
		say("%s %s: %s", what, path, line);
	}
	fclose(f);
	return 0;
}

static int cat_files(void)
{
	const char *from = NULL;
	char path[256];
	int bad = 0;

	while (param("harness.cat", path, sizeof(path), &from))
		bad |= print_file("cat", path);
	return bad;
}

/*
 * harness.hog: see the top.  Only one MiB at a time is dirty, so the
 * hog's own unreclaimable memory stays small; writing a page that reclaim
 * dropped faults a new one in, itself through reclaim when memory is
 * short.  Returns the child's pid, 0 without harness.hog, -1 on error.
 */
static pid_t start_hog(void)
{
	const size_t chunk = 1 << 20, page = sysconf(_SC_PAGESIZE);
	char arg[32], *end, *mem, done = 1;
	size_t len, off, i;
	int pass[2];
	long mib;
	pid_t pid;

	if (!param("harness.hog", arg, sizeof(arg), NULL))
		return 0;
	mib = strtol(arg, &end, 10);
	if (*end || mib < 1 || mib > 1 << 20) {
		say("harness.hog=%s: give a number of MiB, 1 to 1048576", arg);
		return -1;
	}
	len = (size_t)mib * chunk;
	if (pipe(pass)) {
		say("hog: pipe failed: %s", strerror(errno));
		return -1;
	}
	pid = fork();
	if (pid < 0) {
		say("hog: fork failed: %s", strerror(errno));
		close(pass[0]);
		close(pass[1]);
		return -1;
	}
	if (pid > 0) {
		int st = 0;

		close(pass[1]);
		/* Memory is full once the first pass is over. */
		if (read(pass[0], &done, 1) != 1) {
			waitpid(pid, &st, 0);
			say("hog: ended before its first pass was over (%s %d)",
			    WIFSIGNALED(st) ? "signal" : "exit status",
			    WIFSIGNALED(st) ? WTERMSIG(st) : WEXITSTATUS(st));
			close(pass[0]);
			return -1;
		}
		close(pass[0]);
		say("hog: %ld MiB, pid %d, first pass over", mib, (int)pid);
		if (print_file("hog start", "/proc/vmstat")) {
			kill(pid, SIGKILL);
			waitpid(pid, &st, 0);
			return -1;
		}
		return pid;
	}
	close(pass[0]);
	/* NORESERVE: the hog may map more than the guest has. */
	mem = mmap(NULL, len, PROT_READ | PROT_WRITE,
		   MAP_PRIVATE | MAP_ANONYMOUS | MAP_NORESERVE, -1, 0);
	if (mem == MAP_FAILED) {
		say("hog: mmap of %ld MiB failed: %s", mib, strerror(errno));
		_exit(1);
	}
	for (;;) {
		for (off = 0; off < len; off += chunk) {
			for (i = 0; i < chunk; i += page)
				mem[off + i] = 1;
			if (madvise(mem + off, chunk, MADV_FREE)) {
				say("hog: MADV_FREE failed: %s", strerror(errno));
				_exit(1);
			}
		}
		if (pass[1] >= 0 && write(pass[1], &done, 1) == 1) {
			close(pass[1]);
			pass[1] = -1;
		}
	}
}

static int stop_hog(pid_t pid)
{
	int st;

	if (pid <= 0)
		return 0;
	/*
	 * A hog that already ended (an OOM kill, which ends it with SIGKILL
	 * as this does, or a failure) is named here; one killed but not yet
	 * gone is not, and the harness checks /proc/vmstat's oom_kill.
	 */
	if (waitpid(pid, &st, WNOHANG) == pid) {
		say("hog: ended while the modules loaded (%s %d)",
		    WIFSIGNALED(st) ? "signal" : "exit status",
		    WIFSIGNALED(st) ? WTERMSIG(st) : WEXITSTATUS(st));
		return 1;
	}
	kill(pid, SIGKILL);
	if (waitpid(pid, &st, 0) != pid) {
		say("hog: waitpid failed: %s", strerror(errno));
		return 1;
	}
	if (!WIFSIGNALED(st) || WTERMSIG(st) != SIGKILL) {
		say("hog: ended before the modules were loaded (status 0x%x)", st);
		return 1;
	}
	say("hog: stopped");
	return 0;
}

#if defined(__aarch64__)
/* The virtual counter, after an isb: the reads stay in program order. */
static unsigned long long tsc(void)
{
	unsigned long long t;

	__asm__ volatile("isb; mrs %0, cntvct_el0" : "=r"(t) :: "memory");
	return t;
}
#else
static unsigned long long tsc(void)
{
	unsigned int lo, hi;

	__asm__ volatile("lfence; rdtsc" : "=a"(lo), "=d"(hi) :: "memory");
	return ((unsigned long long)hi << 32) | lo;
}
#endif

/*
 * COUNT send+receive pairs of SIZE bytes.  The receiver copies one byte
 * (MSG_TRUNC gives the datagram's length), and the sender sends without a
 * UDP checksum: what is timed is the stack's and the allocator's work on
 * the packets, plus the copy from user space.
 */
static int udp_pairs(int tx, int rx, const struct sockaddr_in *to, long size,
		     long count, unsigned long long *ticks)
{
	static char payload[65536];
	unsigned long long t0 = tsc();
	long i;

	for (i = 0; i < count; i++) {
		ssize_t n = sendto(tx, payload, size, 0,
				   (const struct sockaddr *)to, sizeof(*to));

		if (n != size) {
			say("udp size=%ld: sendto %ld returned %zd: %s (%d)",
			    size, i, n, strerror(errno), errno);
			return 1;
		}
		n = recv(rx, payload, 1, MSG_TRUNC);
		if (n != size) {
			say("udp size=%ld: recv %ld returned %zd: %s (%d)",
			    size, i, n, strerror(errno), errno);
			return 1;
		}
	}
	*ticks = tsc() - t0;
	return 0;
}

static int udp_runs(void)
{
	struct sockaddr_in to = { .sin_family = AF_INET, .sin_port = htons(9) };
	struct timeval timeout = { .tv_sec = 5 };
	char spec[256], *rest, *tok, *save = NULL;
	int tx, rx, one = 1;
	long count;

	if (!param("harness.udp", spec, sizeof(spec), NULL))
		return 0;
	count = strtol(spec, &rest, 10);
	if (count < 1 || *rest != ':') {
		say("bad harness.udp '%s' (COUNT:SIZE[,SIZE...])", spec);
		return 1;
	}
	to.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
	tx = socket(AF_INET, SOCK_DGRAM, 0);
	rx = socket(AF_INET, SOCK_DGRAM, 0);
	if (tx < 0 || rx < 0 ||
	    bind(rx, (struct sockaddr *)&to, sizeof(to)) ||
	    setsockopt(rx, SOL_SOCKET, SO_RCVTIMEO, &timeout, sizeof(timeout)) ||
	    setsockopt(tx, SOL_SOCKET, SO_NO_CHECK, &one, sizeof(one))) {
		say("udp sockets on 127.0.0.1:9: %s (%d)", strerror(errno), errno);
		return 1;
	}
	for (tok = strtok_r(rest + 1, ",", &save); tok;
	     tok = strtok_r(NULL, ",", &save)) {
		unsigned long long ticks;
		char *end;
		long size = strtol(tok, &end, 10);

		if (*end || size < 1 || size > 65507) {
			say("bad harness.udp size '%s' (1 to 65507)", tok);
			return 1;
		}
		/* Untimed first round: the sockets' and the caches' first use. */
		if (udp_pairs(tx, rx, &to, size, 16, &ticks) ||
		    udp_pairs(tx, rx, &to, size, count, &ticks))
			return 1;
		say("udp size=%ld count=%ld tsc=%llu", size, count, ticks);
	}
	close(tx);
	close(rx);
	return 0;
}

/*
 * harness.callers: the kernel's own callers of the bulk API, driven from
 * here.  Each workload is a loop of one operation; the init runs it
 * untimed a few times (first use of caches and rings), then COUNT units
 * timed with the TSC.
 */
#define PAGE_SZ 4096UL
/*
 * The maple workloads' mappings, far from the init's own: FOREST_N
 * one-page read-only mappings FOREST_STEP apart, with three unmapped pages
 * after each.  They make the mm's VMA tree three levels high, so that a
 * store preallocates 1 + 3 * 3 nodes, and a page mapped in the middle of
 * a gap adds two ranges to a leaf (a split when it is full) that its unmap
 * removes again (a rebalance).
 */
#define FOREST_AT 0x100000000000UL
#define FOREST_N 256
#define FOREST_STEP (4 * PAGE_SZ)
/* The mapping mprotect() splits and merges: three pages after the forest. */
#define SPLIT_AT (FOREST_AT + (FOREST_N + 1) * FOREST_STEP)
/* NOPs per io_uring_enter(), and the rings' entries. */
#define URING_BATCH 256
#define MAP_ANON_PRIVATE (MAP_PRIVATE | MAP_ANONYMOUS | MAP_FIXED_NOREPLACE)

static int forest(void)
{
	long i;

	for (i = 0; i < FOREST_N; i++) {
		void *at = (void *)(FOREST_AT + i * FOREST_STEP);

		if (mmap(at, PAGE_SZ, PROT_READ, MAP_ANON_PRIVATE, -1, 0) != at) {
			say("callers: mmap %p: %s (%d)", at, strerror(errno), errno);
			return 1;
		}
	}
	return 0;
}

static int unforest(void)
{
	if (munmap((void *)FOREST_AT, SPLIT_AT + 4 * PAGE_SZ - FOREST_AT)) {
		say("callers: munmap: %s (%d)", strerror(errno), errno);
		return 1;
	}
	return 0;
}

/* One page in the middle of gap i % FOREST_N, mapped and unmapped. */
static int op_mmap(long i)
{
	void *at = (void *)(FOREST_AT + (i % FOREST_N) * FOREST_STEP + 2 * PAGE_SZ);

	if (mmap(at, PAGE_SZ, PROT_READ | PROT_WRITE, MAP_ANON_PRIVATE, -1, 0) != at ||
	    munmap(at, PAGE_SZ)) {
		say("callers: mmap/munmap %p: %s (%d)", at, strerror(errno), errno);
		return 1;
	}
	return 0;
}

static int setup_mprotect(void)
{
	void *at = (void *)SPLIT_AT;

	if (forest())
		return 1;
	if (mmap(at, 3 * PAGE_SZ, PROT_READ | PROT_WRITE, MAP_ANON_PRIVATE, -1, 0) != at) {
		say("callers: mmap %p: %s (%d)", at, strerror(errno), errno);
		return 1;
	}
	return 0;
}

/* The middle page read-only (three VMAs), then writable again (one). */
static int op_mprotect(long i)
{
	void *mid = (void *)(SPLIT_AT + PAGE_SZ);

	(void)i;
	if (mprotect(mid, PAGE_SZ, PROT_READ) ||
	    mprotect(mid, PAGE_SZ, PROT_READ | PROT_WRITE)) {
		say("callers: mprotect: %s (%d)", strerror(errno), errno);
		return 1;
	}
	return 0;
}

static unsigned long brk_start;

static int setup_brk(void)
{
	if (forest())
		return 1;
	brk_start = syscall(SYS_brk, 0);
	return 0;
}

/*
 * The heap one page longer, then back.  Nothing from here to the end of
 * the loop calls malloc() (stdout's buffer was allocated by the first
 * say()), which would move the break under brk_start.
 */
static int op_brk(long i)
{
	(void)i;
	if ((unsigned long)syscall(SYS_brk, brk_start + PAGE_SZ) != brk_start + PAGE_SZ ||
	    (unsigned long)syscall(SYS_brk, brk_start) != brk_start) {
		say("callers: brk around %#lx failed", brk_start);
		return 1;
	}
	return 0;
}

struct ring {
	int fd;
	unsigned *sq_tail, *sq_mask, *sq_array, *cq_head, *cq_tail, *cq_mask;
	struct io_uring_sqe *sqes;
	struct io_uring_cqe *cqes;
	void *sq, *cq;
	size_t sq_len, cq_len, sqes_len;
};

static struct ring uring;

static void *ring_map(struct ring *r, size_t len, off_t off)
{
	void *p = mmap(NULL, len, PROT_READ | PROT_WRITE,
		       MAP_SHARED | MAP_POPULATE, r->fd, off);

	if (p == MAP_FAILED)
		say("callers: io_uring mmap %#lx: %s (%d)", (unsigned long)off,
		    strerror(errno), errno);
	return p;
}

/* io_uring_setup() and the rings' mappings, as liburing does them. */
static int ring_open(struct ring *r)
{
	struct io_uring_params p;
	char *sq, *cq;

	memset(&p, 0, sizeof(p));
	r->fd = syscall(__NR_io_uring_setup, URING_BATCH, &p);
	if (r->fd < 0) {
		say("callers: io_uring_setup: %s (%d)", strerror(errno), errno);
		return 1;
	}
	r->sq_len = p.sq_off.array + p.sq_entries * sizeof(unsigned);
	r->cq_len = p.cq_off.cqes + p.cq_entries * sizeof(struct io_uring_cqe);
	r->sqes_len = p.sq_entries * sizeof(struct io_uring_sqe);
	if (p.features & IORING_FEAT_SINGLE_MMAP) {
		if (r->cq_len > r->sq_len)
			r->sq_len = r->cq_len;
		r->cq_len = 0;
	}
	r->sq = ring_map(r, r->sq_len, IORING_OFF_SQ_RING);
	r->cq = r->cq_len ? ring_map(r, r->cq_len, IORING_OFF_CQ_RING) : r->sq;
	r->sqes = ring_map(r, r->sqes_len, IORING_OFF_SQES);
	if (r->sq == MAP_FAILED || r->cq == MAP_FAILED || r->sqes == MAP_FAILED)
		return 1;
	sq = r->sq;
	cq = r->cq;
	r->sq_tail = (unsigned *)(sq + p.sq_off.tail);
	r->sq_mask = (unsigned *)(sq + p.sq_off.ring_mask);
	r->sq_array = (unsigned *)(sq + p.sq_off.array);
	r->cq_head = (unsigned *)(cq + p.cq_off.head);
	r->cq_tail = (unsigned *)(cq + p.cq_off.tail);
	r->cq_mask = (unsigned *)(cq + p.cq_off.ring_mask);
	r->cqes = (struct io_uring_cqe *)(cq + p.cq_off.cqes);
	return 0;
}

static int ring_close(struct ring *r)
{
	if (munmap(r->sqes, r->sqes_len) ||
	    (r->cq_len && munmap(r->cq, r->cq_len)) ||
	    munmap(r->sq, r->sq_len) || close(r->fd)) {
		say("callers: io_uring close: %s (%d)", strerror(errno), errno);
		return 1;
	}
	return 0;
}

/* URING_BATCH NOPs in one io_uring_enter(), their completions reaped. */
static int ring_nops(struct ring *r)
{
	unsigned tail = *r->sq_tail, head, i;
	int ret;

	for (i = 0; i < URING_BATCH; i++, tail++) {
		unsigned idx = tail & *r->sq_mask;

		memset(&r->sqes[idx], 0, sizeof(r->sqes[idx]));
		r->sqes[idx].opcode = IORING_OP_NOP;
		r->sqes[idx].user_data = i;
		r->sq_array[idx] = idx;
	}
	__atomic_store_n(r->sq_tail, tail, __ATOMIC_RELEASE);
	ret = syscall(__NR_io_uring_enter, r->fd, URING_BATCH, URING_BATCH,
		      IORING_ENTER_GETEVENTS, NULL, 0);
	if (ret != URING_BATCH) {
		say("callers: io_uring_enter returned %d: %s (%d)", ret,
		    strerror(errno), errno);
		return 1;
	}
	head = *r->cq_head;
	tail = __atomic_load_n(r->cq_tail, __ATOMIC_ACQUIRE);
	if (tail - head != URING_BATCH) {
		say("callers: %u io_uring completions, expected %d", tail - head,
		    URING_BATCH);
		return 1;
	}
	for (; head != tail; head++) {
		if (r->cqes[head & *r->cq_mask].res) {
			say("callers: NOP completed with %d",
			    r->cqes[head & *r->cq_mask].res);
			return 1;
		}
	}
	__atomic_store_n(r->cq_head, head, __ATOMIC_RELEASE);
	return 0;
}

static int setup_uring(void)
{
	return ring_open(&uring);
}

static int teardown_uring(void)
{
	return ring_close(&uring);
}

static int op_uring(long i)
{
	(void)i;
	return ring_nops(&uring);
}

/* A ring per batch: its request cache starts empty every time. */
static int op_uring_new(long i)
{
	struct ring r;

	(void)i;
	return ring_open(&r) || ring_nops(&r) || ring_close(&r);
}

static int sysfs_dir = -1;

static int setup_kfree_rcu(void)
{
	sysfs_dir = open("/sys/kernel", O_RDONLY | O_DIRECTORY);
	if (sysfs_dir < 0) {
		say("callers: open /sys/kernel: %s (%d)", strerror(errno), errno);
		return 1;
	}
	return 0;
}

static int teardown_kfree_rcu(void)
{
	return close(sysfs_dir);
}

/*
 * A sysfs attribute opened and closed: the close frees the attribute's
 * kernfs_open_node with kfree_rcu() (fs/kernfs/file.c), which batches it
 * for kfree_bulk() after a grace period.
 */
static int op_kfree_rcu(long i)
{
	int fd = openat(sysfs_dir, "uevent_seqnum", O_RDONLY);

	(void)i;
	if (fd < 0 || close(fd)) {
		say("callers: /sys/kernel/uevent_seqnum: %s (%d)", strerror(errno),
		    errno);
		return 1;
	}
	return 0;
}

/*
 * The network workloads' frame: Ethernet, IPv4 and UDP headers and 22
 * bytes of payload (64 bytes), from 10.0.0.2 to 10.0.0.1 and to a MAC
 * address that is not the receiver's.
 */
static unsigned char net_frame[64] = {
	0x02, 0, 0, 0, 0, 0x01, 0x02, 0, 0, 0, 0, 0x02, 0x08, 0x00,
	0x45, 0, 0, 50, 0, 0, 0, 0, 64, IPPROTO_UDP, 0, 0,
	10, 0, 0, 2, 10, 0, 0, 1,
	0x30, 0x39, 0, 9, 0, 30, 0, 0,
};

static void net_frame_csum(void)
{
	unsigned int sum = 0, i;

	net_frame[24] = 0;
	net_frame[25] = 0;
	for (i = 14; i < 34; i += 2)
		sum += (net_frame[i] << 8) | net_frame[i + 1];
	sum = (sum & 0xffff) + (sum >> 16);
	sum = ~((sum & 0xffff) + (sum >> 16)) & 0xffff;
	net_frame[24] = sum >> 8;
	net_frame[25] = sum & 0xff;
}

/* Frames per BPF_PROG_TEST_RUN: 64 batches of the test run's 64. */
#define XDP_FRAMES 4096

static int xdp_prog = -1;

/*
 * An XDP program that returns XDP_PASS.  In live-frames mode the test run
 * puts each frame in a page of its page_pool, runs the program, and
 * passes the batch to the stack as sk_buffs, whose shells it allocates
 * with kmem_cache_alloc_bulk() (net/bpf/test_run.c, xdp_recv_frames());
 * 6.1 takes each page out of the pool as it builds the sk_buff around it
 * (xdp_release_frame()).  The loopback is their device, and IP drops them
 * (PACKET_OTHERHOST): kfree_skb() frees each shell and gives the page to
 * the page allocator, and the next batch takes 64 new pages.
 */
static int setup_xdp(void)
{
	struct bpf_insn prog[] = {
		{ .code = BPF_ALU64 | BPF_MOV | BPF_K, .dst_reg = BPF_REG_0,
		  .imm = XDP_PASS },
		{ .code = BPF_JMP | BPF_EXIT },
	};
	union bpf_attr a;

	net_frame_csum();
	memset(&a, 0, sizeof(a));
	a.prog_type = BPF_PROG_TYPE_XDP;
	a.insns = (unsigned long)prog;
	a.insn_cnt = sizeof(prog) / sizeof(prog[0]);
	a.license = (unsigned long)"GPL";
	xdp_prog = syscall(__NR_bpf, BPF_PROG_LOAD, &a, sizeof(a));
	if (xdp_prog < 0) {
		say("callers: BPF_PROG_LOAD: %s (%d)", strerror(errno), errno);
		return 1;
	}
	return 0;
}

static int teardown_xdp(void)
{
	return close(xdp_prog);
}

static int op_xdp(long i)
{
	union bpf_attr a;

	(void)i;
	memset(&a, 0, sizeof(a));
	a.test.prog_fd = xdp_prog;
	a.test.data_in = (unsigned long)net_frame;
	a.test.data_size_in = sizeof(net_frame);
	a.test.repeat = XDP_FRAMES;
	a.test.flags = BPF_F_TEST_XDP_LIVE_FRAMES;
	/* EINTR: stopped part-way, by a signal or task work for this task. */
	if (syscall(__NR_bpf, BPF_PROG_TEST_RUN, &a, sizeof(a))) {
		say("callers: BPF_PROG_TEST_RUN: %s (%d)", strerror(errno), errno);
		return 1;
	}
	return 0;
}

/* A request to rtnetlink, answered with an acknowledgement. */
struct tc_req {
	struct nlmsghdr nh;
	struct tcmsg tc;
	char attrs[256];
};

static struct rtattr *tc_attr(struct tc_req *r, unsigned short type,
			      const void *data, size_t len)
{
	struct rtattr *rta = (struct rtattr *)((char *)r + NLMSG_ALIGN(r->nh.nlmsg_len));

	rta->rta_type = type;
	rta->rta_len = RTA_LENGTH(len);
	if (len)
		memcpy(RTA_DATA(rta), data, len);
	r->nh.nlmsg_len = NLMSG_ALIGN(r->nh.nlmsg_len) + RTA_ALIGN(rta->rta_len);
	return rta;
}

/* The nested attribute @nest ends here. */
static void tc_nest_end(struct tc_req *r, struct rtattr *nest)
{
	nest->rta_len = (char *)r + r->nh.nlmsg_len - (char *)nest;
}

static void tc_init(struct tc_req *r, unsigned short type, int ifindex,
		    unsigned int parent, unsigned int handle, const char *kind)
{
	memset(r, 0, sizeof(*r));
	r->nh.nlmsg_len = NLMSG_LENGTH(sizeof(r->tc));
	r->nh.nlmsg_type = type;
	r->nh.nlmsg_flags = NLM_F_REQUEST | NLM_F_ACK;
	if (type == RTM_NEWQDISC)
		r->nh.nlmsg_flags |= NLM_F_CREATE | NLM_F_EXCL;
	r->tc.tcm_family = AF_UNSPEC;
	r->tc.tcm_ifindex = ifindex;
	r->tc.tcm_parent = parent;
	r->tc.tcm_handle = handle;
	if (kind)
		tc_attr(r, TCA_KIND, kind, strlen(kind) + 1);
}

/*
 * @r to rtnetlink, its first answer into @ans (@len bytes): the bytes
 * received, or -1 (said why).
 */
static ssize_t tc_talk(struct tc_req *r, struct nlmsghdr *ans, size_t len,
		       const char *what)
{
	struct sockaddr_nl to = { .nl_family = AF_NETLINK };
	int fd = socket(AF_NETLINK, SOCK_RAW | SOCK_CLOEXEC, NETLINK_ROUTE);
	ssize_t n = -1;

	if (fd >= 0 && sendto(fd, r, r->nh.nlmsg_len, 0, (struct sockaddr *)&to,
			      sizeof(to)) == (ssize_t)r->nh.nlmsg_len)
		n = recv(fd, ans, len, 0);
	if (n < 0)
		say("callers: %s: netlink: %s (%d)", what, strerror(errno), errno);
	if (fd >= 0)
		close(fd);
	return n;
}

static int tc_send(struct tc_req *r, const char *what)
{
	union {
		struct nlmsghdr nh;
		char buf[1024];
	} ack;
	ssize_t n = tc_talk(r, &ack.nh, sizeof(ack), what);
	int err = -EPROTO;

	if (n < 0)
		return 1;
	if (n >= (ssize_t)NLMSG_LENGTH(sizeof(struct nlmsgerr)) &&
	    ack.nh.nlmsg_type == NLMSG_ERROR)
		err = ((struct nlmsgerr *)NLMSG_DATA(&ack.nh))->error;
	if (err) {
		say("callers: %s: %s (%d)", what, strerror(-err), -err);
		return 1;
	}
	return 0;
}

/*
 * The qdisc workloads: dummy0 (CONFIG_DUMMY makes it) up, with a tbf at
 * its root whose burst (1600 bytes) lets the first 25 frames through and
 * whose rate (8 bytes/s: 8 s of guest time per frame, far longer than a
 * run) holds every later frame in its child qdisc: a bfifo of QDISC_BYTES
 * (qdisc-one) or an fq_codel of QDISC_PACKETS (qdisc-batch).  A full
 * bfifo drops each frame that arrives, and the send fails with ENOBUFS;
 * fq_codel drops half of its fattest flow, 64 frames, as one list, and
 * the send succeeds (NET_XMIT_CN).  Either way __dev_xmit_skb() frees the
 * drops with kfree_skb_list_reason().  The frames the qdisc holds are
 * charged to the socket's send buffer: QDISC_PACKETS of them (about
 * 100 KB) must stay below its default (212992 bytes), or a send blocks.
 */
#define QDISC_PACKETS 128
#define QDISC_BYTES (QDISC_PACKETS * 64)

static int qdisc_dev = -1, qdisc_sock = -1;
static struct sockaddr_ll qdisc_to;
/* Sends the qdisc refused (ENOBUFS) since the count was reset. */
static long qdisc_refused;
/* dummy0's tx_packets when the timed loop started. */
static char qdisc_sent[32];

/* dummy0's count of frames sent, as its statistics file has it. */
static int qdisc_tx_packets(char *buf, size_t len)
{
	if (read_line("/sys/class/net/dummy0/statistics/tx_packets", buf,
		      len) > 0)
		return 0;
	say("callers: dummy0's tx_packets: %s (%d)", strerror(errno), errno);
	return 1;
}

/* No frame left the qdisc during the loop: what it did not hold, it
 * dropped.
 */
static int qdisc_held(void)
{
	char now[32];

	if (qdisc_tx_packets(now, sizeof(now)))
		return 1;
	if (!strcmp(now, qdisc_sent))
		return 0;
	say("callers: dummy0 sent frames during the loop (%s -> %s)",
	    qdisc_sent, now);
	return 1;
}

/* dummy0 up, qdisc_sock a socket of @family and @type, qdisc_dev its
 * index.
 */
static int dummy_up(int family, int type)
{
	struct ifreq ifr;

	memset(&ifr, 0, sizeof(ifr));
	strcpy(ifr.ifr_name, "dummy0");
	qdisc_sock = socket(family, type | SOCK_CLOEXEC, 0);
	if (qdisc_sock < 0 || ioctl(qdisc_sock, SIOCGIFINDEX, &ifr)) {
		say("callers: dummy0: %s (%d)", strerror(errno), errno);
		return 1;
	}
	qdisc_dev = ifr.ifr_ifindex;
	if (ioctl(qdisc_sock, SIOCGIFFLAGS, &ifr) ||
	    (ifr.ifr_flags |= IFF_UP, ioctl(qdisc_sock, SIOCSIFFLAGS, &ifr))) {
		say("callers: dummy0 up: %s (%d)", strerror(errno), errno);
		return 1;
	}
	return 0;
}

static int qdisc_setup(int fq_codel)
{
	struct tc_tbf_qopt tbf = {
		.rate = { .rate = 8, .linklayer = TC_LINKLAYER_ETHERNET },
		.limit = fq_codel ? 0 : QDISC_BYTES,
	};
	/* 200 s worth at 8 bytes/s: TCA_TBF_BURST, as .buffer (in ticks of
	 * the packet scheduler's clock) stops at 2^32 ns.
	 */
	unsigned int burst = 1600, limit = QDISC_PACKETS;
	struct tc_req r;
	struct rtattr *nest;

	net_frame_csum();
	if (dummy_up(AF_PACKET, SOCK_RAW))
		return 1;
	tc_init(&r, RTM_NEWQDISC, qdisc_dev, TC_H_ROOT, TC_H_MAKE(1 << 16, 0),
		"tbf");
	nest = tc_attr(&r, TCA_OPTIONS, NULL, 0);
	tc_attr(&r, TCA_TBF_PARMS, &tbf, sizeof(tbf));
	tc_attr(&r, TCA_TBF_BURST, &burst, sizeof(burst));
	tc_nest_end(&r, nest);
	if (tc_send(&r, "tbf on dummy0"))
		return 1;
	if (fq_codel) {
		tc_init(&r, RTM_NEWQDISC, qdisc_dev, TC_H_MAKE(1 << 16, 1),
			TC_H_MAKE(10 << 16, 0), "fq_codel");
		nest = tc_attr(&r, TCA_OPTIONS, NULL, 0);
		tc_attr(&r, TCA_FQ_CODEL_LIMIT, &limit, sizeof(limit));
		tc_nest_end(&r, nest);
		if (tc_send(&r, "fq_codel under the tbf"))
			return 1;
	}
	memset(&qdisc_to, 0, sizeof(qdisc_to));
	qdisc_to.sll_family = AF_PACKET;
	qdisc_to.sll_protocol = htons(ETH_P_IP);
	qdisc_to.sll_ifindex = qdisc_dev;
	qdisc_to.sll_halen = ETH_ALEN;
	memcpy(qdisc_to.sll_addr, net_frame, ETH_ALEN);
	return 0;
}

static int setup_qdisc_one(void)
{
	return qdisc_setup(0);
}

static int setup_qdisc_batch(void)
{
	return qdisc_setup(1);
}

static void start_qdisc(void)
{
	qdisc_refused = 0;
	if (qdisc_tx_packets(qdisc_sent, sizeof(qdisc_sent)))
		qdisc_sent[0] = '\0';
}

/* qdisc-one: the bfifo refused every timed frame. */
static int check_qdisc_one(long ops)
{
	if (qdisc_held())
		return 1;
	if (qdisc_refused == ops)
		return 0;
	say("callers: qdisc-one: %ld of %ld frames refused, expected all",
	    qdisc_refused, ops);
	return 1;
}

/* qdisc-batch: fq_codel took every frame (its drops are older ones) and
 * sent none: beyond the 128 it holds, it dropped them all.
 */
static int check_qdisc_batch(long ops)
{
	if (qdisc_held())
		return 1;
	if (!qdisc_refused)
		return 0;
	say("callers: qdisc-batch: %ld of %ld frames refused, expected none",
	    qdisc_refused, ops);
	return 1;
}

/* The root qdisc deleted (what it holds is freed), the socket closed. */
static int teardown_qdisc(void)
{
	struct tc_req r;

	tc_init(&r, RTM_DELQDISC, qdisc_dev, TC_H_ROOT, 0, NULL);
	if (tc_send(&r, "deleting dummy0's qdisc"))
		return 1;
	return close(qdisc_sock);
}

static int op_qdisc(long i)
{
	ssize_t n = sendto(qdisc_sock, net_frame, sizeof(net_frame), 0,
			   (struct sockaddr *)&qdisc_to, sizeof(qdisc_to));

	/* ENOBUFS: the qdisc dropped this frame itself (NET_XMIT_DROP). */
	(void)i;
	if (n < 0 && errno == ENOBUFS) {
		qdisc_refused++;
	} else if (n != sizeof(net_frame)) {
		say("callers: send on dummy0 returned %zd: %s (%d)", n,
		    strerror(errno), errno);
		return 1;
	}
	return 0;
}

/*
 * The fq-gc workload: sch_fq at dummy0's root, its flows in two trees
 * (TCA_FQ_BUCKETS_LOG 1), fed by an unconnected UDP socket that sends
 * each datagram to another address and port through dummy0.  fq keys
 * such a socket's flows by the packet's hash (with an orphan mask of all
 * ones, one flow per destination), and dummy0 sends each packet at once,
 * so every flow is left empty, detached.  A flow detached for longer than
 * FQ_GC_AGE (3 s) is garbage: once most of fq's flows are idle, each packet
 * makes fq_classify() call fq_gc(), which collects up to 8 garbage flows
 * on the way down to the packet's flow in its tree (for a new flow, down
 * to where it will go) and frees them with one kmem_cache_free_bulk().
 * The setup makes FQ_FLOWS flows, the start waits until they are garbage,
 * and each timed send makes one flow more and frees up to 8.
 */
#define FQ_FLOWS 65536
#define FQ_PORTS 16384

/* Destinations used so far: the next send goes to a new one. */
static long fq_next;
/* fq's count of flows freed by its garbage collection at the start of
 * the timed loop; ~0 if it could not be read.
 */
static unsigned long long fq_gc_start;

/* sch_fq's statistics (TCA_XSTATS) of dummy0's root qdisc. */
static int fq_stats(struct tc_fq_qd_stats *st)
{
	union {
		struct nlmsghdr nh;
		char buf[4096];
	} ans;
	struct rtattr *rta;
	struct tc_req r;
	ssize_t n;
	int len;

	tc_init(&r, RTM_GETQDISC, qdisc_dev, TC_H_ROOT, 0, NULL);
	/* The answer goes to the asking socket only with NLM_F_ECHO. */
	r.nh.nlmsg_flags |= NLM_F_ECHO;
	n = tc_talk(&r, &ans.nh, sizeof(ans), "fq's statistics");
	if (n < 0)
		return 1;
	if (n < (ssize_t)NLMSG_LENGTH(sizeof(struct tcmsg)) ||
	    ans.nh.nlmsg_type != RTM_NEWQDISC) {
		say("callers: fq's statistics: no answer (%zd bytes, type %d)", n,
		    n > 0 ? ans.nh.nlmsg_type : -1);
		return 1;
	}
	len = ans.nh.nlmsg_len - NLMSG_LENGTH(sizeof(struct tcmsg));
	for (rta = TCA_RTA(NLMSG_DATA(&ans.nh)); RTA_OK(rta, len);
	     rta = RTA_NEXT(rta, len))
		if (rta->rta_type == TCA_XSTATS &&
		    RTA_PAYLOAD(rta) >= sizeof(*st)) {
			memcpy(st, RTA_DATA(rta), sizeof(*st));
			return 0;
		}
	say("callers: fq's statistics: no TCA_XSTATS");
	return 1;
}

/* One datagram to the next destination: a new flow. */
static int op_fq(long i)
{
	static const char payload[18];
	struct sockaddr_in to = { .sin_family = AF_INET };
	long d = fq_next++;
	ssize_t n;

	(void)i;
	/* 10.10.0.1 and on, beside dummy0's 10.9.0.1 in 10.0.0.0/8 */
	to.sin_addr.s_addr = htonl(0x0a0a0001 + d / FQ_PORTS);
	to.sin_port = htons(1024 + d % FQ_PORTS);
	n = sendto(qdisc_sock, payload, sizeof(payload), 0,
		   (struct sockaddr *)&to, sizeof(to));
	if (n != sizeof(payload)) {
		say("callers: UDP send on dummy0 returned %zd: %s (%d)", n,
		    strerror(errno), errno);
		return 1;
	}
	return 0;
}

static int setup_fq(void)
{
	unsigned int log = 1, mask = ~0U;
	struct ifreq ifr;
	struct sockaddr_in *sin = (struct sockaddr_in *)&ifr.ifr_addr;
	struct tc_req r;
	struct rtattr *nest;
	long i;

	if (dummy_up(AF_INET, SOCK_DGRAM))
		return 1;
	memset(&ifr, 0, sizeof(ifr));
	strcpy(ifr.ifr_name, "dummy0");
	sin->sin_family = AF_INET;
	sin->sin_addr.s_addr = htonl(0x0a090001);
	if (ioctl(qdisc_sock, SIOCSIFADDR, &ifr)) {
		say("callers: dummy0's address: %s (%d)", strerror(errno), errno);
		return 1;
	}
	tc_init(&r, RTM_NEWQDISC, qdisc_dev, TC_H_ROOT, TC_H_MAKE(1 << 16, 0),
		"fq");
	nest = tc_attr(&r, TCA_OPTIONS, NULL, 0);
	tc_attr(&r, TCA_FQ_BUCKETS_LOG, &log, sizeof(log));
	tc_attr(&r, TCA_FQ_ORPHAN_MASK, &mask, sizeof(mask));
	tc_nest_end(&r, nest);
	if (tc_send(&r, "fq on dummy0"))
		return 1;
	for (i = 0; i < FQ_FLOWS; i++)
		if (op_fq(i))
			return 1;
	return 0;
}

/* FQ_GC_AGE: with settle()'s half second before, every flow made so far
 * has been idle for more than that (fq_gc_candidate() wants it strictly
 * older), and none has gone yet.
 */
static void start_fq(void)
{
	struct timespec wait = { .tv_sec = 3 };
	struct tc_fq_qd_stats st;

	fq_gc_start = ~0ULL;
	if (nanosleep(&wait, NULL)) {
		say("callers: nanosleep: %s (%d)", strerror(errno), errno);
	} else if (!fq_stats(&st)) {
		if (st.flows >= FQ_FLOWS && !st.gc_flows)
			fq_gc_start = st.gc_flows;
		else
			say("callers: fq-gc: %u flows, %llu collected before the "
			    "loop; expected %d or more, none", st.flows,
			    (unsigned long long)st.gc_flows, FQ_FLOWS);
	}
}

/*
 * fq-gc: the garbage collection freed 4 flows or more per timed send on
 * average (about 7.6 in the records: 8 at most, fewer where the way down
 * holds fewer garbage flows).
 */
static int check_fq(long ops)
{
	struct tc_fq_qd_stats st;

	if (fq_gc_start == ~0ULL || fq_stats(&st))
		return 1;
	if (st.gc_flows - fq_gc_start >= 4ULL * ops)
		return 0;
	say("callers: fq-gc: %llu flows freed by fq_gc() in %ld sends, expected "
	    "4 or more per send on average", st.gc_flows - fq_gc_start, ops);
	return 1;
}

static const struct workload {
	const char *name;
	int (*setup)(void);
	int (*op)(long i);
	int (*teardown)(void);
	long unit;	/* units (what COUNT counts) per op() */
	long warmup;	/* untimed op() calls first */
	void (*start)(void);	/* just before the timed loop */
	int (*check)(long ops);	/* just after it: did it do what it should? */
} workloads[] = {
	{ "mmap", forest, op_mmap, unforest, 1, FOREST_N },
	{ "mprotect", setup_mprotect, op_mprotect, unforest, 1, 64 },
	{ "brk", setup_brk, op_brk, unforest, 1, 64 },
	{ "uring", setup_uring, op_uring, teardown_uring, URING_BATCH, 4 },
	{ "uring-new", NULL, op_uring_new, NULL, URING_BATCH, 4 },
	{ "kfree_rcu", setup_kfree_rcu, op_kfree_rcu, teardown_kfree_rcu, 1, 64 },
	{ "xdp", setup_xdp, op_xdp, teardown_xdp, XDP_FRAMES, 2 },
	{ "qdisc-one", setup_qdisc_one, op_qdisc, teardown_qdisc, 1,
	  2 * QDISC_PACKETS, start_qdisc, check_qdisc_one },
	{ "qdisc-batch", setup_qdisc_batch, op_qdisc, teardown_qdisc, 1,
	  2 * QDISC_PACKETS, start_qdisc, check_qdisc_batch },
	{ "fq-gc", setup_fq, op_fq, teardown_qdisc, 1, 64, start_fq, check_fq },
};

/*
 * Every harness.callers_snap file's lines, tagged with the workload.  Read
 * with read(), not stdio: stdio's buffers come from malloc(), which may
 * move the program break that the brk workload holds.
 */
static int callers_snap(const char *name, const char *when)
{
	const char *from = NULL;
	char path[256], buf[1024];
	int bad = 0;

	while (param("harness.callers_snap", path, sizeof(path), &from)) {
		int fd = open(path, O_RDONLY);
		size_t used = 0;

		if (fd < 0) {
			say("callers: %s: %s (%d)", path, strerror(errno), errno);
			bad = 1;
			continue;
		}
		for (;;) {
			ssize_t n = read(fd, buf + used, sizeof(buf) - 1 - used);
			char *start = buf, *nl;

			if (n < 0) {
				say("callers: read %s: %s (%d)", path, strerror(errno),
				    errno);
				bad = 1;
				break;
			}
			used += n;
			buf[used] = '\0';
			while ((nl = strchr(start, '\n'))) {
				*nl = '\0';
				say("callers snap %s %s %s: %s", name, when, path, start);
				start = nl + 1;
			}
			used -= start - buf;
			memmove(buf, start, used + 1);
			/* the last line without its newline, or one too long */
			if (used && (!n || used == sizeof(buf) - 1)) {
				say("callers snap %s %s %s: %s", name, when, path, buf);
				used = 0;
			}
			if (!n)
				break;
		}
		close(fd);
	}
	return bad;
}

/*
 * Half a second of guest time with the CPU idle, before a timed loop: the
 * work that the warm-up and the workloads before left to kworkers and RCU
 * callbacks (a dying io_uring ring, kvfree_rcu()'s batches) runs now, not
 * inside the loop, so that a loop's figure does not depend on what ran
 * before it.  Under -icount with sleep=off, QEMU skips the idle time.
 */
static int settle(void)
{
	struct timespec half = { .tv_nsec = 500000000 };

	if (nanosleep(&half, NULL)) {
		say("callers: nanosleep: %s (%d)", strerror(errno), errno);
		return 1;
	}
	return 0;
}

static int callers_one(const struct workload *w, long count)
{
	unsigned long long t0, ticks;
	long i, ops = count / w->unit;

	if (w->setup && w->setup())
		return 1;
	for (i = 0; i < w->warmup; i++)
		if (w->op(i))
			return 1;
	if (settle())
		return 1;
	if (callers_snap(w->name, "before"))
		return 1;
	if (w->start)
		w->start();
	t0 = tsc();
	for (i = 0; i < ops; i++)
		if (w->op(i))
			return 1;
	ticks = tsc() - t0;
	if ((w->check && w->check(ops)) || callers_snap(w->name, "after") ||
	    (w->teardown && w->teardown()))
		return 1;
	say("callers name=%s count=%ld tsc=%llu", w->name, count, ticks);
	return 0;
}

static int callers_runs(void)
{
	char spec[256], *tok, *save = NULL;
	size_t n = sizeof(workloads) / sizeof(workloads[0]);

	if (!param("harness.callers", spec, sizeof(spec), NULL))
		return 0;
	for (tok = strtok_r(spec, ",", &save); tok;
	     tok = strtok_r(NULL, ",", &save)) {
		char *colon = strchr(tok, ':'), *end = "";
		long count = 0;
		size_t i;

		if (colon) {
			*colon = '\0';
			count = strtol(colon + 1, &end, 10);
		}
		for (i = 0; i < n && strcmp(workloads[i].name, tok); i++)
			;
		if (i == n || count < 1 || *end || count % workloads[i].unit) {
			say("bad harness.callers workload '%s' (NAME:COUNT, COUNT "
			    "a multiple of the NAME's unit)", tok);
			return 1;
		}
		if (callers_one(&workloads[i], count))
			return 1;
	}
	return 0;
}

int main(void)
{
	char list[512], unload[8], path[256], params[2048], group[64] = "";
	char nokfence[512], interval[32] = "";
	char *mods[MAX_MODS];
	int nmods = 0, status = 0, i;
	pid_t hog;

	mount("proc", "/proc", "proc", 0, NULL);
	mount("sysfs", "/sys", "sysfs", 0, NULL);
	mount("devtmpfs", "/dev", "devtmpfs", 0, NULL);
	mount("debugfs", "/sys/kernel/debug", "debugfs", 0, NULL);
	setvbuf(stdout, NULL, _IOLBF, 0);
	read_cmdline();
	say("start (cmdline: %s)", cmdline);

	/*
	 * The first non-root memcg turns memcg_kmem_enabled_key on, which
	 * patches the page allocator's code (text_poke_bp()): make the group
	 * before the hog runs that code on another CPU.  Made after, a CPU
	 * under QEMU's TCG once took the patch's int3 as an oops in
	 * __alloc_pages().  The hog stays in the root memcg: join after.
	 */
	if (param("harness.cgroup", group, sizeof(group), NULL) &&
	    make_cgroup(group)) {
		status = 1;
		group[0] = '\0';
	}
	hog = start_hog();
	if (hog < 0)
		status = 1;
	if (group[0] && join_cgroup(group))
		status = 1;
	if (write_knobs())
		status = 1;

	if (param("harness.load", list, sizeof(list), NULL)) {
		char *save = NULL, *m;

		for (m = strtok_r(list, ",", &save); m && nmods < MAX_MODS;
		     m = strtok_r(NULL, ",", &save))
			mods[nmods++] = m;
	}

	if (!param("harness.nokfence", nokfence, sizeof(nokfence), NULL))
		nokfence[0] = '\0';

	for (i = 0; i < nmods && !status; i++) {
		int fd, quiet = listed(nokfence, mods[i]);

		snprintf(path, sizeof(path), "/lib/modules/%s.ko", mods[i]);
		module_params(mods[i], params, sizeof(params));
		fd = open(path, O_RDONLY | O_CLOEXEC);
		if (fd < 0) {
			say("missing module %s: %s", path, strerror(errno));
			status = 1;
			break;
		}
		if (quiet && kfence_off(interval, sizeof(interval))) {
			close(fd);
			status = 1;
			break;
		}
		say("loading %s params '%s'", mods[i], params);
		if (syscall(SYS_finit_module, fd, params, 0) != 0) {
			say("load %s failed: %s (errno %d)", mods[i], strerror(errno), errno);
			status = 1;
		} else {
			say("loaded %s", mods[i]);
		}
		close(fd);
		if (quiet && kfence_restore(interval))
			status = 1;
	}

	if (stop_hog(hog))
		status = 1;

	if (param("harness.unload", unload, sizeof(unload), NULL) &&
	    !strcmp(unload, "1")) {
		for (i = nmods - 1; i >= 0; i--) {
			if (syscall(SYS_delete_module, mods[i], O_NONBLOCK) != 0) {
				say("unload %s failed: %s (errno %d)", mods[i],
				    strerror(errno), errno);
				status = 1;
			} else {
				say("unloaded %s", mods[i]);
			}
		}
	}
	if (!status && udp_runs())
		status = 1;
	if (!status && callers_runs())
		status = 1;
	if (cat_files())
		status = 1;
#ifdef HARNESS_SHELL
	say("modules loaded (status %d); /bin/sh, exit ends the guest", status);
	if (fork() == 0) {
		execl("/bin/sh", "sh", (char *)NULL);
		_exit(127);
	}
	wait(NULL);
#endif
	finish(status);
	return 0;
}
