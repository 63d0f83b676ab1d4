/* SPDX-License-Identifier: MIT */
/*
 * shmclockd: owns one shared simulation clock, runs its clock thread and
 * serves its control socket. See `shmclockd --help` and README.md.
 *
 * One file past 800 lines: option parsing, the config's overrides and the
 * signal loop are one sequence, run once; the clock's work is elsewhere.
 */
#define _GNU_SOURCE
#include <errno.h>
#include <fcntl.h>
#include <getopt.h>
#include <math.h>
#include <poll.h>
#include <signal.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/signalfd.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/un.h>
#include <sys/wait.h>
#include <unistd.h>

#include <shmclock/shmclock.h>
#include <shmclock/writer.h>

#include "clockthread.h"
#include "config.h"
#include "control.h"
#include "duration.h"
#include "log.h"
#include "mode_distribute.h"
#include "mode_follow.h"
#include "mode_lockstep.h"
#include "mode_plain.h"
#include "paths.h"
#include "request.h"
#include "ros2.h"
#include "ros2_glue.h"
#include "source.h"
#include "status_fields.h"
#include "record.h"
#include "timeline.h"
#include "mode_replay.h"

/* Command-line settings, kept to re-apply over the file on SIGHUP. */
struct overrides {
	const char *config_path;
	bool config_optional; /* --config-if-present: a missing file is no config */
	const char *name, *source, *start, *unix_zero, *step, *socket;
	double scale;
	int hz, sched_priority; /* sched_priority: -1 = from the config */
	bool paused, reset, remove_on_exit;
	int notify_fd;
	int ls_participants;        /* --lockstep N; 0: as the config says */
	double ls_max_scale;        /* --max-scale; NAN: as the config says */
	const char *ls_stall, *ls_on_death;
	const char *ls_evict, *ls_on_stall, *ls_max_ahead;
	const char *record, *replay;
};

#define OPT_HELP_STATUS 0x100
#define OPT_RECORD 0x101
#define OPT_REPLAY 0x102

/* The status table as --help-status prints it: a line per field (its path,
 * kind, unit, modes, metric), then its help. */
static void print_status_fields(FILE *f)
{
	static const char *const kinds[] = {
		[SF_TEXT] = "text", [SF_BOOL] = "bool", [SF_GAUGE] = "gauge", [SF_COUNT] = "counter",
		[SF_OBJECT] = "object", [SF_LIST] = "list", [SF_BY] = "by-" SF_BY_LABEL,
		[SF_HIST] = "histogram",
	};
	static const char *const units[] = {
		[SF_NONE] = "-", [SF_NS] = "ns", [SF_US] = "us", [SF_S] = "s", [SF_HZ] = "Hz",
	};

	fprintf(f, "%-40s %-10s %-4s %-24s %s\n", "FIELD", "KIND", "UNIT", "MODES", "METRIC: HELP");
	for (size_t i = 0; i < STATUS_NFIELDS; i++) {
		const struct status_field *x = &status_fields[i];
		char path[96], modes[64];

		snprintf(path, sizeof(path), "%s%s%s", x->section, x->section[0] ? "." : "", x->key);
		if ((x->modes & SF_ALL) == SF_ALL)
			snprintf(modes, sizeof(modes), "all,%s", x->modes & SF_SOMETIMES ? "sometimes," : "");
		else
			snprintf(modes, sizeof(modes), "%s%s%s%s%s", x->modes & SF_PLAIN ? "plain," : "",
				 x->modes & SF_LOCKSTEP ? "lockstep," : "",
				 x->modes & SF_LEADER ? "leader," : "",
				 x->modes & SF_FOLLOWER ? "follower," : "",
				 x->modes & SF_SOMETIMES ? "sometimes," : "");
		modes[strlen(modes) - 1] = 0;
		fprintf(f, "%-40s %-10s %-4s %-24s %s%s%s\n", path, kinds[x->kind], units[x->unit], modes,
			x->metric ? x->metric : "-", ": ", x->help);
	}
	fprintf(f, "\nplain, lockstep, leader, follower (all): the modes whose status has the field; "
		   "sometimes: only\nunder the condition its help names. METRIC: shmclock-panel's "
		   "(a time in seconds).\n");
}

/* "MIN to MAX" of a key of the table, for --help. */
static const char *range_of(const char *section, const char *key, char *buf, size_t n)
{
	const struct config_key *k = config_key_find(section, key);

	if (k->kind == KEY_SCALE)
		snprintf(buf, n, "%g to %g", CONFIG_SCALE_MIN, CONFIG_SCALE_MAX);
	else
		snprintf(buf, n, "%g to %g", k->min, k->max);
	return buf;
}

static void usage(FILE *f)
{
	char scale[32], hz[32], prio[32];

	range_of(NULL, "TimeScale", scale, sizeof(scale));
	range_of(NULL, "PublishHz", hz, sizeof(hz));
	range_of(NULL, "SchedPriority", prio, sizeof(prio));
	fprintf(f,
		"usage: shmclockd [options] [-- COMMAND [ARGS...]]\n"
		"\n"
		"Serve a shared simulation clock in /dev/shm/shmclock.NAME.\n"
		"\n"
		"  -c, --config FILE      JSON config (keys: see --help-config and shmclock.json(5))\n"
		"      --config-if-present FILE\n"
		"                         as -c, but a missing FILE means the defaults (the\n"
		"                         systemd unit's /etc/shmclock/NAME.json); SIGHUP reads\n"
		"                         it once it exists\n"
		"  -n, --name NAME        clock name (default: default)\n"
		"      --source S         time source, one of those below (default simulation)\n"
		"      --scale X          time scale, %s (default 1); applied to a\n"
		"                         continued clock too (as --paused)\n"
		"      --hz N             clock-thread rate, %s (default 100)\n"
		"      --sched-priority N run the clock thread SCHED_FIFO at N, %s (needs\n"
		"                         CAP_SYS_NICE; default 0: normal scheduling)\n"
		"      --start TIME       start time: 1.5s, 250ms, seconds, or an ISO-8601 UTC date\n"
		"      --unix-zero TIME   UNIX time of simulation zero (OSI stamping)\n"
		"      --step DURATION    fixed source: simulated time per tick\n"
		"      --paused           start paused\n"
		"      --lockstep N       lockstep (fixed, external or replay source): the clock waits\n"
		"                         for its participants' grants and starts once N joined\n"
		"      --max-scale X      lockstep: never faster than X times real time\n"
		"                         (default: as fast as the grants allow)\n"
		"      --stall-after D    lockstep: log who holds the clock after D of real\n"
		"                         time (default 2s)\n"
		"      --on-death P       lockstep: evict (default) drops a dead participant;\n"
		"                         abort stops the clock and exits with status 86\n"
		"      --evict-after D    lockstep: a participant holding the clock for D of\n"
		"                         real time has stalled (default: never)\n"
		"      --on-stall P       lockstep: wait (default without --evict-after),\n"
		"                         evict (default with it) drops the staller; abort\n"
		"                         stops the clock and exits with status 87\n"
		"      --max-grant-ahead D lockstep: refuse grants beyond the clock's time\n"
		"                         + D (default 1 day)\n"
		"      --socket PATH      control socket (default: $XDG_RUNTIME_DIR/shmclock/NAME.sock,\n"
		"                         /run/shmclock/NAME.sock for root)\n"
		"      --record FILE      record each change of the time function, with its\n"
		"                         cause, to FILE, a new MCAP file (doc/record.md)\n"
		"      --replay FILE      replay source: publish FILE's recorded function again\n"
		"                         at its pace (implies --source replay)\n"
		"      --reset            start from the config even if the clock exists\n"
		"                         (default: continue an existing clock without a jump)\n"
		"      --remove-on-exit   remove the clock when stopping\n"
		"      --notify-fd FD     write READY=1 to FD once serving (sd_notify is also\n"
		"                         supported through $NOTIFY_SOCKET)\n"
		"      --log-level L      error | warn | info | debug (default info)\n"
		"  -h, --help             this help\n"
		"      --help-config      the config's keys: what each is, its option, and what a\n"
		"                         reload (SIGHUP) does with it\n"
		"      --help-status      status's fields: kind, unit, the modes that have it, its\n"
		"                         metric in shmclock-panel\n"
		"      --help-commands    the control commands: their arguments, whether they\n"
		"                         change time, the clock modes that take them\n"
		"  -V, --version          version\n"
		"\n",
		scale, hz, prio);
	source_help(f);
	fprintf(f,
		"\n"
		"With -- COMMAND, shmclockd starts the clock, runs COMMAND with SHMCLOCK_NAME\n"
		"set, forwards SIGINT/SIGTERM/SIGHUP to it, removes the clock and socket when\n"
		"it ends, and exits with its status (86 when a lockstep participant died with\n"
		"--on-death abort, 87 when one stalled with --on-stall abort: the command is\n"
		"stopped and the participant named).\n"
		"Signals: SIGTERM/SIGINT stop; SIGHUP reloads the config file.\n");
}

static int die_usage(const char *msg, const char *arg)
{
	fprintf(stderr, "shmclockd: %s%s%s (see shmclockd --help)\n", msg, arg ? ": " : "",
		arg ? arg : "");
	return 2;
}

/* A whole-number option in the range of config key @section.@key: 0, or 2
 * with "@what from MIN to MAX" printed. */
static int int_arg(const char *what, const char *section, const char *key, const char *arg, int *out)
{
	const struct config_key *k = config_key_find(section, key);
	char *end, msg[128];
	long v = strtol(arg, &end, 10);

	*out = (int)v;
	if (end != arg && !*end && *out >= k->min && *out <= k->max)
		return 0;
	snprintf(msg, sizeof(msg), "%s from %g to %g", what, k->min, k->max);
	return die_usage(msg, arg);
}

/* A number option in the range of config key @section.@key (KEY_SCALE):
 * 0, or 2 with "@option must be EXPECTED" printed. */
static int scale_arg(const char *option, const char *section, const char *key, const char *arg,
		     double *out)
{
	const struct config_key *k = config_key_find(section, key);
	char msg[128];

	if (!number_parse(arg, out) && config_scale_ok(*out))
		return 0;
	snprintf(msg, sizeof(msg), "%s must be %s", option, k->expect);
	return die_usage(msg, arg);
}

/* A duration option in the range of config key @section.@key (KEY_TIME):
 * 0, or 2 with a message printed. */
static int time_arg(const char *option, const char *section, const char *key, const char *arg,
		    int64_t *out)
{
	const struct config_key *k = config_key_find(section, key);
	char why[256], msg[128];

	if (!duration_parse(arg, out, why, sizeof(why)) && *out >= k->min && (!k->max || *out <= k->max))
		return 0;
	if (k->max)
		snprintf(msg, sizeof(msg), "%s must be %s", option, k->expect);
	else
		snprintf(msg, sizeof(msg), "%s must be a positive duration", option);
	return die_usage(msg, arg);
}

/* Applies command-line settings over cfg; 0 or 2 with a message printed. */
static int apply_overrides(struct shmclockd_config *c, const struct overrides *o)
{
	char why[256];

	if (o->name) {
		if (shmclock_check_name(o->name))
			return die_usage("--name must be 1 to " SHMCLOCK__XSTR(SHMCLOCK_NAME_MAX)
					 " of [A-Za-z0-9_.-]", o->name);
		snprintf(c->name, sizeof(c->name), "%s", o->name);
	}
	if (o->source) {
		const char *na;

		c->source = source_lookup(o->source, &na);
		if (!c->source) {
			if (na)
				return die_usage(na, NULL);
			snprintf(why, sizeof(why), "unknown --source (expected %s)", source_names());
			return die_usage(why, o->source);
		}
	}
	if (!isnan(o->scale))
		c->scale = o->scale;
	if (o->hz)
		c->hz = o->hz;
	if (o->sched_priority >= 0)
		c->sched_priority = o->sched_priority;
	if (o->paused)
		c->paused = true;
	if (o->start) {
		if (time_parse(o->start, &c->start_ns, why, sizeof(why)))
			return die_usage(why, NULL);
		c->has_start = true;
	}
	if (o->unix_zero) {
		if (time_parse(o->unix_zero, &c->unix_zero_ns, why, sizeof(why)))
			return die_usage(why, NULL);
		c->has_unix_zero = true;
	}
	if (o->step) {
		if (duration_parse(o->step, &c->step_ns, why, sizeof(why)) || c->step_ns <= 0)
			return die_usage("--step must be a positive duration", o->step);
	}
	if (o->socket)
		snprintf(c->socket_path, sizeof(c->socket_path), "%s", o->socket);
	if (o->record) {
		if (!o->record[0] || strlen(o->record) >= sizeof(c->record))
			return die_usage("--record takes a file's path of 1 to 1023 bytes", o->record);
		snprintf(c->record, sizeof(c->record), "%s", o->record);
	}
	if (o->replay) {
		if (!o->replay[0] || strlen(o->replay) >= sizeof(c->replay))
			return die_usage("--replay takes a file's path of 1 to 1023 bytes", o->replay);
		snprintf(c->replay, sizeof(c->replay), "%s", o->replay);
		/* --replay FILE alone is the replay source. */
		if (!o->source)
			c->source = source_by_id(SHMCLOCK_SOURCE_REPLAY);
	}
	if (o->ls_participants)
		c->ls_participants = o->ls_participants;
	if (!isnan(o->ls_max_scale))
		c->ls_max_scale = o->ls_max_scale;
	if (o->ls_stall && time_arg("--stall-after", "Lockstep", "StallAfter", o->ls_stall, &c->ls_stall_ns))
		return 2;
	if (o->ls_on_death && config_on_death(o->ls_on_death, &c->ls_abort))
		return die_usage("--on-death must be evict or abort", o->ls_on_death);
	if (o->ls_evict && time_arg("--evict-after", "Lockstep", "EvictAfter", o->ls_evict, &c->ls_evict_ns))
		return 2;
	if (o->ls_on_stall) {
		if (config_on_stall(o->ls_on_stall, &c->ls_on_stall))
			return die_usage("--on-stall must be wait, evict or abort", o->ls_on_stall);
		c->ls_on_stall_given = true;
	}
	if (o->ls_max_ahead && time_arg("--max-grant-ahead", "Lockstep", "MaxGrantAhead", o->ls_max_ahead,
					&c->ls_max_ahead_ns))
		return 2;
	if (!c->ls_participants && (!isnan(o->ls_max_scale) || o->ls_stall || o->ls_on_death ||
				    o->ls_evict || o->ls_on_stall || o->ls_max_ahead))
		return die_usage("--max-scale, --stall-after, --on-death, --evict-after, --on-stall "
				 "and --max-grant-ahead need lockstep (--lockstep N or a Lockstep "
				 "config)", NULL);
	if (config_validate(c, why, sizeof(why)))
		return die_usage(why, NULL);
	return 0;
}

/* The whole configuration: file first, then the command line. */
static int load_config(struct shmclockd_config *c, const struct overrides *o)
{
	char err[CONFIG_ERR_MAX];

	config_defaults(c);
	if (o->config_path) {
		int r = config_load_file(o->config_path, c, err, sizeof(err));

		if (r == -ENOENT && o->config_optional) {
			config_defaults(c); /* nothing was read; the defaults stand */
			log_msg(LOG_INFO, "%s: not there; built-in defaults and the command line",
				o->config_path);
		} else if (r) {
			fprintf(stderr, "shmclockd: %s\n", err);
			return 2;
		}
	}
	return apply_overrides(c, o);
}

static int parse_args(int argc, char **argv, struct overrides *o, char ***command)
{
	static const struct option opts[] = {
		{ "config", required_argument, NULL, 'c' },
		{ "config-if-present", required_argument, NULL, 'C' },
		{ "name", required_argument, NULL, 'n' },
		{ "source", required_argument, NULL, 's' },
		{ "scale", required_argument, NULL, 'x' },
		{ "hz", required_argument, NULL, 'z' },
		{ "sched-priority", required_argument, NULL, 'F' },
		{ "start", required_argument, NULL, 't' },
		{ "unix-zero", required_argument, NULL, 'u' },
		{ "step", required_argument, NULL, 'p' },
		{ "paused", no_argument, NULL, 'P' },
		{ "lockstep", required_argument, NULL, 'K' },
		{ "max-scale", required_argument, NULL, 'M' },
		{ "stall-after", required_argument, NULL, 'A' },
		{ "on-death", required_argument, NULL, 'D' },
		{ "evict-after", required_argument, NULL, 'E' },
		{ "on-stall", required_argument, NULL, 'O' },
		{ "max-grant-ahead", required_argument, NULL, 'G' },
		{ "socket", required_argument, NULL, 'S' },
		{ "record", required_argument, NULL, OPT_RECORD },
		{ "replay", required_argument, NULL, OPT_REPLAY },
		{ "reset", no_argument, NULL, 'R' },
		{ "remove-on-exit", no_argument, NULL, 'X' },
		{ "notify-fd", required_argument, NULL, 'N' },
		{ "log-level", required_argument, NULL, 'L' },
		{ "help", no_argument, NULL, 'h' },
		{ "help-config", no_argument, NULL, 'H' },
		{ "help-status", no_argument, NULL, OPT_HELP_STATUS },
		{ "help-commands", no_argument, NULL, 'Q' },
		{ "version", no_argument, NULL, 'V' },
		{ 0 },
	};
	char *end;
	int c, lvl;

	memset(o, 0, sizeof(*o));
	o->scale = NAN;
	o->ls_max_scale = NAN;
	o->notify_fd = -1;
	o->sched_priority = -1;
	while ((c = getopt_long(argc, argv, "+c:n:hV", opts, NULL)) != -1) {
		switch (c) {
		case 'c':
		case 'C':
			o->config_path = optarg;
			o->config_optional = c == 'C';
			break;
		case 'n':
			o->name = optarg;
			break;
		case 's':
			o->source = optarg;
			break;
		case 'x':
			if (scale_arg("--scale", NULL, "TimeScale", optarg, &o->scale))
				return 2;
			break;
		case 'z':
			if (int_arg("--hz must be a whole number", NULL, "PublishHz", optarg, &o->hz))
				return 2;
			break;
		case 'F':
			if (int_arg("--sched-priority must be a whole number", NULL, "SchedPriority", optarg,
				    &o->sched_priority))
				return 2;
			break;
		case 't':
			o->start = optarg;
			break;
		case 'u':
			o->unix_zero = optarg;
			break;
		case 'p':
			o->step = optarg;
			break;
		case 'P':
			o->paused = true;
			break;
		case 'K':
			if (int_arg("--lockstep takes a number of participants", "Lockstep", "Participants",
				    optarg, &o->ls_participants))
				return 2;
			break;
		case 'M':
			if (scale_arg("--max-scale", "Lockstep", "MaxScale", optarg, &o->ls_max_scale))
				return 2;
			break;
		case 'A':
			o->ls_stall = optarg;
			break;
		case 'D':
			o->ls_on_death = optarg;
			break;
		case 'E':
			o->ls_evict = optarg;
			break;
		case 'O':
			o->ls_on_stall = optarg;
			break;
		case 'G':
			o->ls_max_ahead = optarg;
			break;
		case 'S':
			o->socket = optarg;
			break;
		case OPT_RECORD:
			o->record = optarg;
			break;
		case OPT_REPLAY:
			o->replay = optarg;
			break;
		case 'R':
			o->reset = true;
			break;
		case 'X':
			o->remove_on_exit = true;
			break;
		case 'N':
			o->notify_fd = (int)strtol(optarg, &end, 10);
			if (end == optarg || *end || o->notify_fd < 0)
				return die_usage("--notify-fd takes a file descriptor number", optarg);
			break;
		case 'L':
			lvl = log_level_parse(optarg);
			if (lvl < 0)
				return die_usage("--log-level must be error, warn, info or debug", optarg);
			log_threshold = (enum log_level)lvl;
			break;
		case 'h':
			usage(stdout);
			exit(0);
		case 'H':
			config_print_keys(stdout);
			exit(0);
		case OPT_HELP_STATUS:
			print_status_fields(stdout);
			exit(0);
		case 'Q':
			request_print_commands(stdout);
			exit(0);
		case 'V':
			printf("shmclockd %s\n", shmclock_version());
			exit(0);
		default:
			return 2;
		}
	}
	*command = optind < argc ? argv + optind : NULL;
	if (*command && optind > 0 && strcmp(argv[optind - 1], "--"))
		return die_usage("unexpected argument (put a command after --)", argv[optind]);
	return 0;
}

/* The clock's segment file, /dev/shm/shmclock.NAME. */
static void segment_path(const char *name, char *path, size_t n)
{
	snprintf(path, n, "/dev/shm/shmclock.%s", name);
}

/* The owner of the clock's segment file, -1 if it cannot be seen. */
static int segment_owner(const char *name)
{
	char path[128];
	struct stat st;

	segment_path(name, path, sizeof(path));
	return lstat(path, &st) == 0 ? (int)st.st_uid : -1;
}

/*
 * Whether /dev/shm/shmclock.NAME no longer is the file this daemon holds:
 * someone removed it (a careless rm, a package purge) or put another file
 * there. Readers that open the name find no clock, or another one, while
 * this daemon would go on serving a file nobody can open: it says so and
 * stops (shmclockd(8), THE SEGMENT). True with the message logged.
 */
static bool segment_gone(const char *name, dev_t dev, ino_t ino)
{
	char path[128];
	struct stat st;
	bool removed;

	segment_path(name, path, sizeof(path));
	if (lstat(path, &st) == 0) {
		if (st.st_dev == dev && st.st_ino == ino)
			return false;
		removed = false;
	} else if (errno == ENOENT) {
		removed = true;
	} else {
		return false; /* cannot look (ENOMEM): not proof of anything */
	}
	log_msg(LOG_ERROR, "%s was %s under this daemon: readers that open clock '%s' no longer "
		"find the clock it serves; stopping (a restart makes a new one)", path,
		removed ? "removed" : "replaced", name);
	return true;
}

static void notify_ready(const struct overrides *o)
{
	const char *ns = getenv("NOTIFY_SOCKET");

	if (o->notify_fd >= 0) {
		if (write(o->notify_fd, "READY=1\n", 8) != 8)
			log_msg(LOG_WARN, "--notify-fd %d: %s", o->notify_fd, strerror(errno));
		close(o->notify_fd);
	}
	if (ns && (ns[0] == '/' || ns[0] == '@') && strlen(ns) < sizeof(((struct sockaddr_un *)0)->sun_path)) {
		struct sockaddr_un a = { .sun_family = AF_UNIX };
		int fd = socket(AF_UNIX, SOCK_DGRAM | SOCK_CLOEXEC, 0);
		socklen_t len = (socklen_t)(offsetof(struct sockaddr_un, sun_path) + strlen(ns));

		memcpy(a.sun_path, ns, strlen(ns));
		if (ns[0] == '@')
			a.sun_path[0] = 0; /* abstract namespace */
		if (fd >= 0) {
			sendto(fd, "READY=1", 7, MSG_NOSIGNAL, (struct sockaddr *)&a, len);
			close(fd);
		}
	}
}

static pid_t spawn(char **command, const struct shmclockd_config *c, const char *sock,
		   const sigset_t *old)
{
	pid_t pid = fork();

	if (pid == 0) {
		sigprocmask(SIG_SETMASK, old, NULL);
		setenv("SHMCLOCK_NAME", c->name, 1);
		setenv("SHMCLOCK_SOCKET", sock, 1);
		execvp(command[0], command);
		fprintf(stderr, "shmclockd: cannot run %s: %s\n", command[0], strerror(errno));
		_exit(127);
	}
	return pid;
}

static void reload(const struct overrides *o, struct shmclockd_config *cur,
		   struct clockthread *ct)
{
	static struct shmclockd_config next; /* the clock thread copies what it keeps */
	struct cmd cmd = { .req.kind = CMD_RELOAD };
	const struct config_key *k;
	char err[256], path[64];

	if (!o->config_path) {
		log_msg(LOG_INFO, "SIGHUP: no config file to reload");
		return;
	}
	if (load_config(&next, o)) {
		log_msg(LOG_ERROR, "SIGHUP: the new config is rejected; the clock goes on unchanged");
		return;
	}
	if (ros2_glue_domain(&next, err, sizeof(err))) {
		log_msg(LOG_ERROR, "SIGHUP: %s", err);
		log_msg(LOG_ERROR, "SIGHUP: the new config is rejected; the clock goes on unchanged");
		return;
	}
	/* The keys the config's table marks as changing only with a restart. */
	if ((k = config_reload_change(&next, cur, RELOAD_RESTART, NULL))) {
		log_msg(LOG_ERROR, "SIGHUP: %s changes only with a restart; the new config is rejected",
			config_key_path(k, path, sizeof(path)));
		return;
	}
	if (!next.ls_participants != !cur->ls_participants) {
		log_msg(LOG_ERROR, "SIGHUP: lockstep is turned on or off only with a restart (a "
				   "Lockstep section %s); the new config is rejected",
			next.ls_participants ? "added" : "removed");
		return;
	}
	cmd.arg_config = &next;
	if (clockthread_submit(ct, &cmd)) {
		log_msg(LOG_ERROR, "SIGHUP: %s; the clock goes on unchanged", cmd.err);
		return;
	}
	log_msg(LOG_INFO, "SIGHUP: reloaded %s (scale %g, %d Hz)", o->config_path, next.scale, next.hz);
	/* What describes a fresh clock changes nothing now: said, not hidden. */
	for (k = NULL; (k = config_reload_change(&next, cur, RELOAD_FRESH, k));)
		log_msg(LOG_INFO, "SIGHUP: %s applies to a new clock (a first start, or --reset); "
			"the running clock keeps its own", config_key_path(k, path, sizeof(path)));
	/* The whole new config, not the fields someone remembered to copy:
	 * the control side (this thread: ControlGroup, ControlIdleTimeout,
	 * what status reports) reads *cur. A copy of one field once let a
	 * revoked ControlGroup keep control. What may not change was checked
	 * equal above. */
	*cur = next;
}

/* Everything main() holds, released in one place (stop()). */
struct daemon {
	struct shmclockd_config cfg;
	struct overrides o;
	shmclock_writer_t *w;
	struct clockthread ct;
	bool ct_running;
	struct control ctl;
	bool ctl_open;
	struct ros2 *ros2;
	const struct ros2_api *ros2_api;
	int sfd;
	sigset_t old_mask;
	char sock[108];
	struct clock_mode *mode;  /* the clock thread's: plain, lockstep, distribute or follow */
	struct clock_mode *ls;    /* the same when it is lockstep, else NULL */
	struct clock_mode *follow; /* the same when it is follow, else NULL */
	bool created;             /* this start made the segment (it was not initialised) */
	bool serving;             /* start() succeeded */
	int64_t *due, due_start;  /* a replay in lockstep: its instants (replay_due) */
	size_t ndue;
	bool seg_lost;            /* the segment was removed under us (segment_gone) */
	dev_t seg_dev;            /* the segment file we hold, to notice its removal */
	ino_t seg_ino;
};

/* The clock mode the config asks for (mode.h), before the clock thread
 * starts: lockstep creates the participants' segment; between hosts needs
 * the DDS link. */
static int open_mode(struct daemon *d, char *err, size_t errlen)
{
	const struct shmclockd_config *c = &d->cfg;
	int r;

	if (c->source->id == SHMCLOCK_SOURCE_REPLAY && !c->ls_participants)
		return 0; /* made before the clock was opened (start) */
	if (c->ls_participants) {
		if ((r = mode_lockstep_create(d->w, c, d->ros2, d->ros2_api, &d->mode, err, errlen)))
			return r;
		d->ls = d->mode;
		if (d->due) {
			mode_lockstep_set_due(d->mode, d->due_start, d->due, d->ndue);
			d->due = NULL;
		}
		return 0;
	}
	/* A follower without Lockstep follows either kind of leader. */
	if (d->ros2 && c->source->ops->feed == FEED_LEADER) {
		if ((r = mode_follow_create(d->w, c, d->ros2, d->ros2_api, &d->mode, err, errlen)))
			return r;
		d->follow = d->mode;
		return 0;
	}
	if (d->ros2 && c->dist_publish)
		d->mode = mode_distribute_create(c, d->ros2, d->ros2_api);
	else
		d->mode = mode_plain_create();
	if (!d->mode) {
		snprintf(err, errlen, "out of memory");
		return -ENOMEM;
	}
	return 0;
}

/* A replay in lockstep: the recording's instants, read before the clock is
 * touched (a bad file is refused with nothing served). */
static int replay_due(struct daemon *d, char *err, size_t errlen)
{
	struct tl_recording rec;
	char why[256];
	int r;

	if ((r = tl_load(d->cfg.replay, &rec, why, sizeof(why)))) {
		snprintf(err, errlen, "replay: %.300s: %.190s", d->cfg.replay, why);
		return r;
	}
	r = tl_due_times(&rec, &d->due_start, &d->due, &d->ndue, why, sizeof(why));
	if (r)
		snprintf(err, errlen, "replay: %.300s: %.190s", d->cfg.replay, why);
	else
		log_msg(LOG_INFO, "replay: %s in lockstep: %zu instants of clock '%s'%s%s",
			d->cfg.replay, d->ndue, rec.clock, rec.truncated ? "; " : "",
			rec.truncated ? rec.note : "");
	tl_free(&rec);
	return r;
}

/* The clock's existing writer, for the "already served" message. */
static void say_busy(const char *name, char *err, size_t errlen)
{
	shmclock_t *rd;
	shmclock_info_t in;

	if (shmclock_open(name, &rd) == 0 && shmclock_info(rd, &in) == 0)
		snprintf(err, errlen, "clock '%s' is already served by pid %d (stop it or pick another --name)",
			 name, (int)in.writer_pid);
	else
		snprintf(err, errlen, "clock '%s' is already served by another writer", name);
	shmclock_close(rd);
}

/* 0, or -errno with a message in err (as every step of start()). */
static int open_writer(struct daemon *d, char *err, size_t errlen)
{
	const char *name = d->cfg.name;
	int r = shmclock_writer_open_mode(name, d->cfg.segment_mode, &d->w);

	switch (r) {
	case 0: {
		shmclock_info_t in;
		char path[128];
		struct stat st;

		/* Holding the clock, nobody else can replace the file: what the
		 * name refers to now is ours (segment_gone() watches it). */
		segment_path(name, path, sizeof(path));
		if (lstat(path, &st) < 0) {
			r = -errno;
			snprintf(err, errlen, "%s: %s", path, strerror(-r));
			return r;
		}
		d->seg_dev = st.st_dev;
		d->seg_ino = st.st_ino;
		/* A fresh segment (never initialised): a start that fails takes
		 * it away again, not to leave readers a clock that never was. */
		d->created = shmclock_writer_info(d->w, &in) == 0 && !in.initialized;
		return 0;
	}
	case -EBUSY:
		say_busy(name, err, errlen);
		break;
	case -EPERM:
		snprintf(err, errlen, "/dev/shm/shmclock.%s belongs to another user (uid %d), not to uid %u: "
			 "refusing to use a segment someone else can write; remove it or run as its owner",
			 name, segment_owner(name), (unsigned)geteuid());
		break;
	case -EPROTO:
		snprintf(err, errlen, "/dev/shm/shmclock.%s is not a clock of this version (segment ABI %u); "
			 "it is left alone: remove it to start a new clock there", name,
			 (unsigned)SHMCLOCK_SEGMENT_ABI);
		break;
	default:
		snprintf(err, errlen, "cannot open clock '%s' (/dev/shm/shmclock.%s): %s", name, name,
			 shmclock_strerror(r));
	}
	return r;
}

/*
 * Takes every resource that can fail (the segment, signals, the clock
 * thread, DDS, the control socket) and only then lets the clock thread
 * start or continue the clock: a start that fails leaves the clock as it
 * found it. The daemon's one error convention: 0, or -errno with a
 * one-line message in err (stop() releases what was taken).
 */
static int start(struct daemon *d, char *err, size_t errlen)
{
	struct cmd init = { .req.kind = CMD_INIT };
	sigset_t mask;
	int r;

	/* The DDS module, before the clock is touched. */
	if ((r = ros2_glue_load(&d->cfg, &d->ros2_api, err, errlen)))
		return r;
	/* A recording to replay is read whole before the clock is touched:
	 * a bad one is refused with nothing served. */
	if (d->cfg.source->id == SHMCLOCK_SOURCE_REPLAY && !d->cfg.ls_participants &&
	    (r = mode_replay_create(&d->cfg, &d->mode, err, errlen)))
		return r;
	if (d->cfg.source->id == SHMCLOCK_SOURCE_REPLAY && d->cfg.ls_participants &&
	    (r = replay_due(d, err, errlen)))
		return r;
	/* Likewise a recording that would overwrite a file (recorder_open
	 * checks again, O_EXCL). */
	if (d->cfg.record[0] && (r = recorder_check(d->cfg.record, err, errlen)))
		return r;
	if ((r = open_writer(d, err, errlen)))
		return r;
	/* The recording once the clock is ours (a busy clock leaves no file);
	 * a start that fails after this removes it again (stop). */
	d->ct.rec = NULL;
	if (d->cfg.record[0] &&
	    (r = recorder_open(d->cfg.record, d->cfg.name, &d->ct.rec, err, errlen)))
		return r;
	/* Signals are read from a signalfd in the main loop; every thread
	 * inherits the blocked mask. */
	sigemptyset(&mask);
	sigaddset(&mask, SIGTERM);
	sigaddset(&mask, SIGINT);
	sigaddset(&mask, SIGHUP);
	sigaddset(&mask, SIGCHLD);
	sigaddset(&mask, SIGPIPE);
	sigprocmask(SIG_BLOCK, &mask, &d->old_mask);
	d->sfd = signalfd(-1, &mask, SFD_CLOEXEC | SFD_NONBLOCK);
	if (d->sfd < 0) {
		r = -errno;
		snprintf(err, errlen, "signalfd: %s", strerror(-r));
		return r;
	}
	d->ct.ros2_pub = NULL;
	d->ct.ros2_api = NULL;
	/* The DDS participant before the clock thread, which publishes on
	 * it; nothing arrives from it before follow() below. */
	if (d->ros2_api) {
		if ((r = ros2_glue_open(&d->cfg, &d->ct, d->ros2_api, &d->ros2, err, errlen)))
			return r;
		if (d->cfg.ros2_publish) {
			d->ct.ros2_pub = d->ros2;
			d->ct.ros2_api = d->ros2_api;
		}
	}
	if ((r = open_mode(d, err, errlen)))
		return r;
	r = clockthread_start(&d->ct, d->w, &d->cfg, d->mode);
	if (r) {
		snprintf(err, errlen, "cannot start the clock thread: %s", strerror(-r));
		return r;
	}
	d->ct_running = true;
	if ((r = control_open(&d->ctl, d->sock, &d->cfg, &d->ct, err, errlen)))
		return r;
	d->ctl_open = true;
	d->ctl.rq.ros2 = d->ros2;
	d->ctl.rq.ros2_api = d->ros2_api;
	/* Everything is in place: now the clock. */
	init.arg_init = (struct init_args){ .reset = d->o.reset,
					    .scale_given = !isnan(d->o.scale),
					    .paused_given = d->o.paused };
	if ((r = clockthread_submit(&d->ct, &init))) {
		snprintf(err, errlen, "cannot initialize clock '%s': %s", d->cfg.name, init.err);
		return r;
	}
	if (d->ros2 && d->cfg.source->ops->feed == FEED_ROS2 &&
	    (r = d->ros2_api->follow(d->ros2, d->cfg.ros2_stale_ns, err, errlen)))
		return r;
	/* A leader reads the topic too: the terms of the leaders before it,
	 * and any other live leader of its clock (mode_distribute.c). */
	if (d->ros2 && !d->ls && (d->cfg.source->ops->feed == FEED_LEADER || d->cfg.dist_publish) &&
	    (r = d->ros2_api->dist_follow(d->ros2, config_dist_clock(&d->cfg),
					  mode_distribute_id(d->follow ? mode_follow_distribute(d->follow)
								       : d->mode),
					  d->cfg.dist_stale_ns, err,
					  errlen)))
		return r;
	return 0;
}

/* Releases what start() took, in reverse. */
static void stop(struct daemon *d, bool remove)
{
	/* The follower submits to the clock thread: it stops first. */
	if (d->ros2)
		d->ros2_api->stop(d->ros2);
	if (d->ctl_open)
		control_close(&d->ctl);
	if (d->ct_running)
		clockthread_stop(&d->ct);
	/* After the clock thread: it hands the recorder its last change. A
	 * start that failed leaves no recording behind. */
	if (d->serving)
		recorder_close(d->ct.rec);
	else
		recorder_discard(d->ct.rec);
	d->ct.rec = NULL;
	clock_mode_destroy(d->mode);
	d->mode = d->ls = d->follow = NULL;
	free(d->due); /* a start that failed before the mode took them */
	d->due = NULL;
	if (d->ros2)
		d->ros2_api->close(d->ros2);
	if (d->sfd >= 0)
		close(d->sfd);
	if (!d->w)
		return;
	/* Removed while we still hold the clock: a successor that starts now
	 * either waits for us or creates a new segment, which we never touch. */
	if (remove && !d->seg_lost) {
		int r = shmclock_writer_unlink(d->w, d->cfg.name);

		if (r)
			log_msg(LOG_WARN, "clock '%s' not removed: %s", d->cfg.name,
				r == -ENOENT ? "it is no longer ours" : shmclock_strerror(r));
		else
			log_msg(LOG_INFO, "removed clock '%s'", d->cfg.name);
	}
	shmclock_writer_close(d->w);
	d->w = NULL;
}

int main(int argc, char **argv)
{
	static struct daemon d = { .sfd = -1 };
	char **command = NULL;
	pid_t child = -1;
	int r, status = 0, stopping = 0;

	r = parse_args(argc, argv, &d.o, &command);
	if (r)
		return r;
	r = load_config(&d.cfg, &d.o);
	if (r)
		return r;
	if (d.cfg.socket_path[0])
		snprintf(d.sock, sizeof(d.sock), "%s", d.cfg.socket_path);
	else if (paths_default_socket(d.cfg.name, d.sock, sizeof(d.sock)))
		return die_usage("the default control socket path is too long; set --socket", NULL);
	{
		char err[512];

		if (ros2_glue_domain(&d.cfg, err, sizeof(err))) {
			fprintf(stderr, "shmclockd: %s\n", err);
			return 2;
		}
		if (start(&d, err, sizeof(err))) {
			fprintf(stderr, "shmclockd: %s\n", err);
			d.serving = false;
			/* A segment this start made goes with it: nothing
			 * uninitialised is left for readers to open. */
			stop(&d, d.created);
			return 1;
		}
	}
	d.serving = true;
	log_msg(LOG_INFO, "serving clock '%s' (%s source, %d Hz) on %s", d.cfg.name,
		d.cfg.source->name, d.cfg.hz, d.sock);
	if (command) {
		child = spawn(command, &d.cfg, d.sock, &d.old_mask);
		if (child < 0) {
			fprintf(stderr, "shmclockd: fork: %s\n", strerror(errno));
			status = 1;
			stopping = 1;
		}
	}
	notify_ready(&d.o);

	while (!stopping) {
		struct pollfd fds[CONTROL_CLIENTS_MAX + 4];
		int n = control_pollfds(&d.ctl, fds, CONTROL_CLIENTS_MAX + 2);
		/* Wake often enough to drop idle clients and re-arm a listener
		 * paused for want of descriptors on time. */
		int poll_ms = control_poll_ms(&d.ctl);

		fds[n] = (struct pollfd){ .fd = d.sfd, .events = POLLIN };
		fds[n + 1] = (struct pollfd){ .fd = d.ls	   ? mode_lockstep_notify_fd(d.ls)
						    : d.follow ? mode_follow_notify_fd(d.follow)
							       : -1,
					      .events = POLLIN }; /* -1: ignored */
		if (poll(fds, (nfds_t)n + 2, poll_ms) < 0 && errno != EINTR)
			break;
		control_handle(&d.ctl, fds, n);
		if (segment_gone(d.cfg.name, d.seg_dev, d.seg_ino)) {
			d.seg_lost = true;
			status = 1;
			if (child > 0)
				kill(child, SIGTERM); /* its clock is gone */
			break;
		}
		if (fds[n + 1].revents) {
			char msg[MODE_LOCKSTEP_ABORT_MAX];
			/* A follower host's, once it became one. */
			struct clock_mode *ls = d.ls ? d.ls : mode_follow_lockstep(d.follow);

			/* OnDeath or OnStall abort: the clock thread stopped the
			 * clock. */
			if (!ls || !mode_lockstep_aborted(ls, &status, msg, sizeof(msg)))
				continue;
			fprintf(stderr, "shmclockd: lockstep %s; exiting with status %d\n", msg, status);
			if (child > 0)
				kill(child, SIGTERM);
			break;
		}
		if (fds[n].revents) {
			struct signalfd_siginfo si;

			while (read(d.sfd, &si, sizeof(si)) == sizeof(si)) {
				int sig = (int)si.ssi_signo;

				if (sig == SIGCHLD && child > 0) {
					int st;

					if (waitpid(child, &st, WNOHANG) == child) {
						status = WIFEXITED(st) ? WEXITSTATUS(st) : 128 + WTERMSIG(st);
						log_msg(LOG_INFO, "command exited with status %d", status);
						stopping = 1;
					}
				} else if (child > 0 && (sig == SIGTERM || sig == SIGINT || sig == SIGHUP)) {
					kill(child, sig); /* CI mode: the command decides */
				} else if (sig == SIGHUP) {
					reload(&d.o, &d.cfg, &d.ct);
				} else if (sig == SIGTERM || sig == SIGINT) {
					log_msg(LOG_INFO, "%s: stopping", strsignal(sig));
					stopping = 1;
				}
			}
		}
	}
	stop(&d, command || d.o.remove_on_exit);
	if (!command && !d.o.remove_on_exit && !d.seg_lost)
		log_msg(LOG_INFO, "stopped; clock '%s' stays for the next shmclockd to continue", d.cfg.name);
	return status;
}
