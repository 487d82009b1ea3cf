/*
 * pyxis_standin: a SPANK plugin that accepts the srun options of NVIDIA pyxis
 * (--container-image, --container-name, --container-mounts,
 * --container-workdir, --container-env) without running any container.
 *
 * It fails where pyxis fails, the way pyxis fails:
 *   - in the option callbacks (srun side and node side): an empty value, an
 *     option given twice with different values (but --container-mounts and
 *     --container-env, whose values pyxis adds to one list), a malformed mount entry
 *     (empty SRC, or "SRC:" with an empty DST), a container name with '/',
 *     an empty name in --container-env. srun then refuses to start the step.
 *   - on the node, in user_init (the error is deferred to
 *     task_init_privileged, as pyxis does, because Slurm 22.05 reports a
 *     user_init failure to srun as "launch failed" with exit code 0):
 *       * --container-name without --container-image when no earlier step of
 *         the same job created that container;
 *       * a squashfs image path (starting with / or ./) that is not a file;
 *       * an image reference enroot cannot parse: its grammar is
 *         [USER@][REGISTRY#]IMAGE[:TAG], IMAGE in lower-case letters, digits
 *         and "/._-" ("Invalid image reference");
 *       * a registry image written without '#' (urm.nvidia.com/team/x:tag):
 *         enroot takes the whole path for a Docker Hub repository and the
 *         pull fails with 401 from registry-1.docker.io. (Real enroot can
 *         recover the registry from a matching credentials-file entry; the
 *         stand-in assumes none, as on a cluster without one.) Other images
 *         are taken as pulled;
 *       * a mount source that does not exist;
 *       * a workdir that is not an existing directory;
 *       * container options without --container-image/--container-name
 *         (pyxis only warns and runs the step on the host; the stand-in is
 *         stricter because that is never what a generated script means).
 *     The task then exits 1 and srun reports "pyxis: error: ..." lines.
 * --container-workdir becomes the working directory of every task (and $PWD),
 * set in task_init, just before exec.
 *
 * Every task of every srun step is recorded as one JSON line appended to the
 * file named by the plugstack.conf argument record=PATH; a rejected step is
 * recorded as one line with "event":"rejected". Named containers are
 * remembered in state_dir=DIR (default: the directory of the record file).
 *
 * Besides pyxis's options it registers --segment=N (sbatch, salloc, srun), which
 * Slurm 24.11 added and this 22.05 cluster lacks: TensorRT-LLM's submit.py writes
 * "#SBATCH --segment=<nodes>" into its launch scripts. On one node a segment is
 * the whole job, so the value is only checked (a positive integer) and ignored.
 *
 * plugstack.conf:  required /path/pyxis_standin.so record=/x/steps.jsonl
 * Build:           gcc -shared -fPIC -o pyxis_standin.so pyxis_standin.c
 */
#define _GNU_SOURCE
#include <errno.h>
#include <fcntl.h>
#include <limits.h>
#include <regex.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/time.h>
#include <sys/types.h>
#include <unistd.h>

#include <slurm/spank.h>

SPANK_PLUGIN(pyxis, 1);

/* batch, extern, interactive and pending steps have ids from here up */
#define FIRST_SPECIAL_STEP 0xfffffffaU

#define OPT_IMAGE 1
#define OPT_NAME 2
#define OPT_MOUNTS 3
#define OPT_WORKDIR 4
#define OPT_ENV 5

static const char *opt_names[] = { "", "--container-image", "--container-name",
				   "--container-mounts", "--container-workdir",
				   "--container-env" };
static char *opt_image;
static char *opt_name;
static char *opt_mounts;
static char *opt_workdir;
static char *opt_env;
static char record_path[PATH_MAX];
static char state_dir[PATH_MAX];
static int name_known;
static int user_init_rv;
static char user_init_error[PATH_MAX + 256];

static int check_mount_format(const char *value)
{
	char *copy = strdup(value), *rest = copy, *entry;
	int rc = 0;

	if (copy == NULL)
		return -1;
	while ((entry = strsep(&rest, ",")) != NULL) {
		char *colon = strchr(entry, ':');

		if (entry[0] == '\0' || entry[0] == ':' ||
		    (colon != NULL && (colon[1] == '\0' || colon[1] == ':'))) {
			slurm_error("pyxis: --container-mounts: invalid format %s", value);
			rc = -1;
			break;
		}
	}
	free(copy);
	return rc;
}

static int check_env_format(const char *value)
{
	const char *p = value;

	for (;;) {
		const char *comma = strchr(p, ',');
		size_t len = comma ? (size_t)(comma - p) : strlen(p);

		if (len == 0) {
			slurm_error("pyxis: --container-env: invalid format %s", value);
			return -1;
		}
		if (comma == NULL)
			return 0;
		p = comma + 1;
	}
}

static int set_opt(int val, const char *optarg, int remote)
{
	char **slot = NULL;

	(void)remote;
	switch (val) {
	case OPT_IMAGE: slot = &opt_image; break;
	case OPT_NAME: slot = &opt_name; break;
	case OPT_MOUNTS: slot = &opt_mounts; break;
	case OPT_WORKDIR: slot = &opt_workdir; break;
	case OPT_ENV: slot = &opt_env; break;
	default: return -1;
	}
	if (optarg == NULL || optarg[0] == '\0') {
		slurm_error("pyxis: %s: argument required", opt_names[val]);
		return -1;
	}
	if (val == OPT_MOUNTS && check_mount_format(optarg) != 0)
		return -1;
	if (val == OPT_ENV && check_env_format(optarg) != 0)
		return -1;
	/* Slurm can call us twice with the same value */
	if (*slot != NULL) {
		if (strcmp(*slot, optarg) == 0)
			return 0;
		/* pyxis adds each --container-mounts/--container-env to its list */
		if (val == OPT_MOUNTS || val == OPT_ENV) {
			char *joined = NULL;

			if (asprintf(&joined, "%s,%s", *slot, optarg) < 0)
				return -1;
			free(*slot);
			*slot = joined;
			return 0;
		}
		slurm_error("pyxis: %s specified multiple times", opt_names[val]);
		return -1;
	}
	if (val == OPT_NAME && strchr(optarg, '/') != NULL) {
		slurm_error("pyxis: --container-name: invalid name (contains '/'): %s", optarg);
		return -1;
	}
	*slot = strdup(optarg);
	return *slot ? 0 : -1;
}

static struct spank_option options[] = {
	{ "container-image", "[USER@][REGISTRY#]IMAGE[:TAG]|PATH",
	  "[pyxis stand-in] the image to use for the container filesystem", 1,
	  OPT_IMAGE, set_opt },
	{ "container-name", "NAME",
	  "[pyxis stand-in] name to use for saving and loading the container", 1,
	  OPT_NAME, set_opt },
	{ "container-mounts", "SRC:DST[:FLAGS][,SRC:DST...]",
	  "[pyxis stand-in] bind mount[s] inside the container", 1, OPT_MOUNTS,
	  set_opt },
	{ "container-workdir", "PATH",
	  "[pyxis stand-in] working directory inside the container", 1,
	  OPT_WORKDIR, set_opt },
	{ "container-env", "NAME[,NAME...]",
	  "[pyxis stand-in] names of environment variables to override", 1,
	  OPT_ENV, set_opt },
	SPANK_OPTIONS_TABLE_END
};

static int set_segment(int val, const char *optarg, int remote)
{
	char *end = NULL;
	long size;

	(void)val;
	(void)remote;
	errno = 0;
	size = optarg ? strtol(optarg, &end, 10) : 0;
	if (optarg == NULL || end == optarg || *end != '\0' || errno != 0 || size < 1) {
		slurm_error("invalid --segment value: %s", optarg ? optarg : "(none)");
		return -1;
	}
	return 0;
}

static struct spank_option segment_option = {
	"segment", "N", "[stand-in of Slurm 24.11's --segment] nodes per segment", 1, 0,
	set_segment
};

static void parse_args(int ac, char **av)
{
	record_path[0] = '\0';
	state_dir[0] = '\0';
	for (int i = 0; i < ac; i++) {
		if (strncmp(av[i], "record=", 7) == 0)
			snprintf(record_path, sizeof(record_path), "%s", av[i] + 7);
		else if (strncmp(av[i], "state_dir=", 10) == 0)
			snprintf(state_dir, sizeof(state_dir), "%s", av[i] + 10);
	}
	if (state_dir[0] == '\0' && record_path[0] != '\0') {
		char *slash;

		snprintf(state_dir, sizeof(state_dir), "%s", record_path);
		slash = strrchr(state_dir, '/');
		if (slash != NULL && slash != state_dir)
			*slash = '\0';
		else
			snprintf(state_dir, sizeof(state_dir), ".");
	}
}

int slurm_spank_init(spank_t sp, int ac, char **av)
{
	spank_context_t ctx = spank_context();

	parse_args(ac, av);
	if (ctx != S_CTX_LOCAL && ctx != S_CTX_REMOTE && ctx != S_CTX_ALLOCATOR)
		return 0;
	if (spank_option_register(sp, &segment_option) != ESPANK_SUCCESS) {
		slurm_error("pyxis: couldn't register option segment");
		return -1;
	}
	if (ctx == S_CTX_ALLOCATOR)
		return 0;
	for (struct spank_option *o = options; o->name != NULL; o++) {
		if (spank_option_register(sp, o) != ESPANK_SUCCESS) {
			slurm_error("pyxis: couldn't register option %s", o->name);
			return -1;
		}
	}
	return 0;
}

/* ---- a tiny JSON writer on a growable buffer ---- */

struct buf {
	char *data;
	size_t len, cap;
};

static void put(struct buf *b, const char *s, size_t n)
{
	if (b->len + n + 1 > b->cap) {
		size_t cap = b->cap ? b->cap : 1024;
		char *d;

		while (b->len + n + 1 > cap)
			cap *= 2;
		d = realloc(b->data, cap);
		if (d == NULL)
			return;
		b->data = d;
		b->cap = cap;
	}
	memcpy(b->data + b->len, s, n);
	b->len += n;
	b->data[b->len] = '\0';
}

static void puts_raw(struct buf *b, const char *s) { put(b, s, strlen(s)); }

/* Bytes >= 0x80 are copied as they are: the reader decodes with surrogateescape. */
static void put_str(struct buf *b, const char *s)
{
	if (s == NULL) {
		puts_raw(b, "null");
		return;
	}
	puts_raw(b, "\"");
	for (const unsigned char *p = (const unsigned char *)s; *p; p++) {
		char esc[8];

		if (*p == '"' || *p == '\\') {
			esc[0] = '\\';
			esc[1] = (char)*p;
			put(b, esc, 2);
		} else if (*p < 0x20 || *p == 0x7f) {
			snprintf(esc, sizeof(esc), "\\u%04x", *p);
			puts_raw(b, esc);
		} else {
			put(b, (const char *)p, 1);
		}
	}
	puts_raw(b, "\"");
}

static void put_key(struct buf *b, const char *key)
{
	if (b->len > 1)
		puts_raw(b, ",");
	put_str(b, key);
	puts_raw(b, ":");
}

static void put_kv_str(struct buf *b, const char *key, const char *val)
{
	put_key(b, key);
	put_str(b, val);
}

static void put_kv_num(struct buf *b, const char *key, long long val)
{
	char num[32];

	put_key(b, key);
	snprintf(num, sizeof(num), "%lld", val);
	puts_raw(b, num);
}

static void put_options(struct buf *b)
{
	put_kv_str(b, "container_image", opt_image);
	put_kv_str(b, "container_name", opt_name);
	put_kv_str(b, "container_mounts", opt_mounts);
	put_kv_str(b, "container_workdir", opt_workdir);
	put_kv_str(b, "container_env", opt_env);
}

static void put_common(struct buf *b, spank_t sp, const char *event)
{
	uint32_t job_id = 0, step_id = 0;
	struct timeval tv;
	char host[256] = "";

	spank_get_item(sp, S_JOB_ID, &job_id);
	spank_get_item(sp, S_JOB_STEPID, &step_id);
	gettimeofday(&tv, NULL);
	gethostname(host, sizeof(host) - 1);
	put_kv_str(b, "event", event);
	put_kv_num(b, "job_id", job_id);
	put_kv_num(b, "step_id", step_id);
	put_kv_str(b, "host", host);
	put_kv_num(b, "pid", (long long)getpid());
	put_kv_num(b, "time_us", (long long)tv.tv_sec * 1000000LL + tv.tv_usec);
}

static void emit(struct buf *b)
{
	int fd;

	puts_raw(b, "}\n");
	if (record_path[0] == '\0' || b->data == NULL)
		goto out;
	fd = open(record_path, O_WRONLY | O_APPEND | O_CREAT | O_CLOEXEC, 0666);
	if (fd < 0) {
		slurm_error("pyxis: cannot open record file %s: %m", record_path);
		goto out;
	}
	if (write(fd, b->data, b->len) != (ssize_t)b->len)
		slurm_error("pyxis: short write to %s", record_path);
	close(fd);
out:
	free(b->data);
	b->data = NULL;
}

/* ---- node-side checks ---- */

static int special_step(spank_t sp)
{
	uint32_t step_id = 0;

	if (spank_get_item(sp, S_JOB_STEPID, &step_id) != ESPANK_SUCCESS)
		return 1;
	return step_id >= FIRST_SPECIAL_STEP;
}

static int any_option(void)
{
	return opt_image || opt_name || opt_mounts || opt_workdir || opt_env;
}

static void name_marker(spank_t sp, char *out, size_t len)
{
	uint32_t job_id = 0;

	spank_get_item(sp, S_JOB_ID, &job_id);
	snprintf(out, len, "%s/pyxis-standin-container.%u.%s", state_dir, job_id, opt_name);
}

static int reject(spank_t sp, const char *fmt, const char *arg)
{
	struct buf b = { 0 };

	snprintf(user_init_error, sizeof(user_init_error), fmt, arg ? arg : "");
	slurm_error("pyxis: error: %s", user_init_error);
	puts_raw(&b, "{");
	put_common(&b, sp, "rejected");
	put_options(&b);
	put_kv_str(&b, "error", user_init_error);
	emit(&b);
	return -1;
}

static int is_registry_host(const char *component, size_t len)
{
	return memchr(component, '.', len) != NULL || memchr(component, ':', len) != NULL ||
	       (len == 9 && strncmp(component, "localhost", 9) == 0);
}

/* What enroot import does with docker://<opt_image>, short of pulling it. */
static int check_image_reference(spank_t sp)
{
	/* groups: 2 user, 4 registry, 5 image, 7 tag */
	static const char pattern[] =
		"^(([^@#/]+)@)?(([^#]+)#)?([a-z0-9/._-]+)(:([A-Za-z0-9._:-]+))?$";
	char message[PATH_MAX + 256];
	regmatch_t m[8];
	regex_t re;
	int matched;

	if (regcomp(&re, pattern, REG_EXTENDED) != 0)
		return reject(sp, "cannot compile the image grammar%s", NULL);
	matched = regexec(&re, opt_image, 8, m, 0) == 0;
	regfree(&re);
	if (!matched)
		return reject(sp, "failed to import docker image: [ERROR] Invalid image reference: "
				  "docker://%s", opt_image);
	if (m[4].rm_so < 0) {
		const char *image = opt_image + m[5].rm_so;
		const char *slash = memchr(image, '/', (size_t)(m[5].rm_eo - m[5].rm_so));

		if (slash != NULL && is_registry_host(image, (size_t)(slash - image))) {
			const char *tag = m[7].rm_so >= 0 ? opt_image + m[7].rm_so : "latest";

			snprintf(message, sizeof(message),
				 "failed to import docker image: [ERROR] URL "
				 "https://registry-1.docker.io/v2/%.*s/manifests/%s returned error "
				 "code: 401 Unauthorized",
				 (int)(m[5].rm_eo - m[5].rm_so), image, tag);
			return reject(sp, "%s", message);
		}
	}
	return 0;
}

static int check_mount_sources(spank_t sp)
{
	char *copy, *rest, *entry;
	int rc = 0;

	if (opt_mounts == NULL)
		return 0;
	copy = strdup(opt_mounts);
	if (copy == NULL)
		return -1;
	rest = copy;
	while ((entry = strsep(&rest, ",")) != NULL) {
		char *colon = strchr(entry, ':');
		struct stat st;

		if (colon != NULL)
			*colon = '\0';
		if (stat(entry, &st) != 0) {
			rc = reject(sp, "mount source does not exist: %s", entry);
			break;
		}
	}
	free(copy);
	return rc;
}

static int check_step(spank_t sp, char *marker, size_t marker_len)
{
	struct stat st;

	if (opt_image == NULL && opt_name == NULL)
		return reject(sp,
			      "--container-mounts/--container-workdir/--container-env given "
			      "without --container-image or --container-name%s",
			      NULL);
	if (opt_name != NULL) {
		name_marker(sp, marker, marker_len);
		name_known = access(marker, F_OK) == 0;
		if (!name_known && opt_image == NULL)
			return reject(sp,
				      "a container with name \"%s\" does not exist, and "
				      "--container-image is not set",
				      opt_name);
	}
	if (opt_image != NULL && !name_known &&
	    (opt_image[0] == '/' || strncmp(opt_image, "./", 2) == 0) &&
	    (stat(opt_image, &st) != 0 || !S_ISREG(st.st_mode)))
		return reject(sp, "squashfs image is not a file: %s", opt_image);
	if (opt_image != NULL && !name_known && opt_image[0] != '/' &&
	    strncmp(opt_image, "./", 2) != 0 && check_image_reference(sp) != 0)
		return -1;
	if (check_mount_sources(sp) != 0)
		return -1;
	if (opt_workdir != NULL && (stat(opt_workdir, &st) != 0 || !S_ISDIR(st.st_mode)))
		return reject(sp, "couldn't chdir to %s: no such directory", opt_workdir);
	return 0;
}

int slurm_spank_user_init(spank_t sp, int ac, char **av)
{
	char marker[PATH_MAX + 64];

	(void)ac;
	(void)av;
	name_known = 0;
	user_init_rv = 0;
	if (!spank_remote(sp) || special_step(sp) || !any_option())
		return 0;
	/*
	 * Like pyxis: do not fail here (srun would report success), remember the
	 * error and fail in task_init_privileged.
	 */
	user_init_rv = check_step(sp, marker, sizeof(marker));
	if (user_init_rv == 0 && opt_name != NULL && !name_known) {
		int fd = open(marker, O_WRONLY | O_CREAT | O_CLOEXEC, 0666);

		if (fd >= 0)
			close(fd);
	}
	return 0;
}

int slurm_spank_task_init_privileged(spank_t sp, int ac, char **av)
{
	(void)ac;
	(void)av;
	if (!spank_remote(sp) || special_step(sp))
		return 0;
	/* the error was printed by user_init already */
	return user_init_rv != 0 ? -1 : 0;
}

int slurm_spank_task_init(spank_t sp, int ac, char **av)
{
	uint32_t rank = 0;
	int local_id = 0, argc = 0;
	char **argv = NULL;
	char cwd[PATH_MAX];
	struct buf b = { 0 };

	(void)ac;
	(void)av;
	if (!spank_remote(sp) || special_step(sp))
		return 0;
	/*
	 * pyxis changes directory in task_init_privileged (inside the container
	 * mount namespace); without a container, slurmstepd's own chdir to the
	 * step's cwd comes after that hook, so the stand-in does it here.
	 */
	if (opt_workdir != NULL) {
		if (chdir(opt_workdir) != 0) {
			slurm_error("pyxis: error: couldn't chdir to %s: %m", opt_workdir);
			return -1;
		}
		spank_setenv(sp, "PWD", opt_workdir, 1);
	}
	if (getcwd(cwd, sizeof(cwd)) == NULL)
		snprintf(cwd, sizeof(cwd), "?");

	spank_get_item(sp, S_TASK_GLOBAL_ID, &rank);
	spank_get_item(sp, S_TASK_ID, &local_id);
	spank_get_item(sp, S_JOB_ARGV, &argc, &argv);

	puts_raw(&b, "{");
	put_common(&b, sp, "task");
	put_kv_num(&b, "task_rank", rank);
	put_kv_num(&b, "local_id", local_id);
	put_options(&b);
	put_key(&b, "container_name_reused");
	puts_raw(&b, name_known ? "true" : "false");
	put_kv_str(&b, "cwd", cwd);
	put_key(&b, "argv");
	puts_raw(&b, "[");
	for (int i = 0; argv != NULL && i < argc; i++) {
		if (i > 0)
			puts_raw(&b, ",");
		put_str(&b, argv[i]);
	}
	puts_raw(&b, "]");
	emit(&b);
	return 0;
}

int slurm_spank_exit(spank_t sp, int ac, char **av)
{
	(void)sp;
	(void)ac;
	(void)av;
	free(opt_image);
	free(opt_name);
	free(opt_mounts);
	free(opt_workdir);
	free(opt_env);
	opt_image = opt_name = opt_mounts = opt_workdir = opt_env = NULL;
	return 0;
}
