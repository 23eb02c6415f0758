/* btk-inspect map: the chunk map, or where the copies of one address live. */
#include <argp.h>
#include <inttypes.h>
#include <stdio.h>
#include <string.h>

#include "common/cli.h"
#include "common/messages.h"
#include "common/sizes.h"
#include "inspect/inspect.h"
#include "libfs/names.h"
#include "libfs/volumes.h"

struct map_args {
	bool have_logical;
	uint64_t logical;
	enum cli_format format;
	char **paths;
	unsigned npaths;
};

static const struct argp_option map_options[] = {
	{ "logical", 'l', "ADDR", 0, "Show the device and physical offset of every copy of ADDR", 0 },
	{ "format", 'f', "FORMAT", 0, "Output format: text (default) or json", 0 },
	{ 0 }
};

static error_t map_parse(int key, char *arg, struct argp_state *state)
{
	struct map_args *a = state->input;

	switch (key) {
	case 'l':
		if (u64_parse(arg, &a->logical))
			argp_error(state, "invalid address '%s'", arg);
		a->have_logical = true;
		break;
	case 'f':
		cli_argp_format(state, arg, CLI_FORMAT_MASK(CLI_FORMAT_TEXT) | CLI_FORMAT_MASK(CLI_FORMAT_JSON),
				&a->format);
		break;
	default: return cli_argp_devices(key, state, &a->paths, &a->npaths);
	}
	return 0;
}

static const char *device_path(const struct fs_device *d)
{
	return d && d->path ? d->path : "<missing>";
}

static void print_chunks(struct fs_info *fs, enum cli_format format)
{
	char flags[BG_FLAGS_STR_BUF], len[32];

	if (format == CLI_FORMAT_JSON)
		printf("[");
	for (size_t i = 0; i < fs->chunks->count; i++) {
		const struct chunk *c = fs->chunks->chunks[i];
		block_group_flags_str(c->type, flags, sizeof(flags));
		if (format == CLI_FORMAT_JSON) {
			printf("%s{\"logical\":%" PRIu64 ",\"length\":%" PRIu64 ",\"type\":%" PRIu64
			       ",\"flags\":\"%s\",\"profile\":\"%s\",\"stripe_len\":%" PRIu64 ",\"stripes\":[",
			       i ? "," : "", c->logical, c->length, c->type, flags, profile_name(c->type),
			       c->stripe_len);
			for (unsigned s = 0; s < c->num_stripes; s++)
				printf("%s{\"devid\":%" PRIu64 ",\"physical\":%" PRIu64 "}", s ? "," : "",
				       c->stripes[s].devid, c->stripes[s].physical);
			printf("]}");
			continue;
		}
		size_format(c->length, len, sizeof(len), SIZE_HUMAN);
		printf("chunk %" PRIu64 " length %" PRIu64 " (%s) %s %s stripes %u\n", c->logical, c->length,
		       len, flags, profile_name(c->type), c->num_stripes);
		for (unsigned s = 0; s < c->num_stripes; s++)
			printf("\tstripe %u devid %" PRIu64 " physical %" PRIu64 " %s\n", s, c->stripes[s].devid,
			       c->stripes[s].physical, device_path(c->stripes[s].dev));
	}
	if (format == CLI_FORMAT_JSON)
		printf("]\n");
}

static int print_logical(struct fs_info *fs, uint64_t logical, enum cli_format format)
{
	struct phys_copy copies[MAX_COPIES];
	const struct chunk *c = chunk_map_lookup(fs->chunks, logical);
	uint64_t contig;
	int n = volumes_map(fs, logical, 1, copies, &contig);

	if (n < 0) {
		msg_error("%s", fs->errmsg);
		return 1;
	}
	if (format == CLI_FORMAT_JSON)
		printf("{\"logical\":%" PRIu64 ",\"chunk\":%" PRIu64 ",\"profile\":\"%s\",\"copies\":[", logical,
		       c->logical, profile_name(c->type));
	else
		printf("logical %" PRIu64 " in chunk %" PRIu64 " (%s), %d cop%s\n", logical, c->logical,
		       profile_name(c->type), n, n == 1 ? "y" : "ies");
	for (int i = 0; i < n; i++) {
		if (format == CLI_FORMAT_JSON)
			printf("%s{\"mirror\":%d,\"devid\":%" PRIu64 ",\"physical\":%" PRIu64 ",\"path\":\"%s\"}",
			       i ? "," : "", i + 1, copies[i].devid, copies[i].physical, device_path(copies[i].dev));
		else
			printf("\tmirror %d devid %" PRIu64 " physical %" PRIu64 " %s\n", i + 1, copies[i].devid,
			       copies[i].physical, device_path(copies[i].dev));
	}
	if (format == CLI_FORMAT_JSON)
		printf("]}\n");
	return 0;
}

int cmd_map(int argc, char **argv)
{
	static const struct argp argp = { map_options, map_parse, "DEVICE...",
		"Print the chunk map (logical ranges, profiles, stripes), or with --logical the "
		"device and physical offset of every copy of one logical address.", NULL, NULL, NULL };
	struct map_args a = { .format = CLI_FORMAT_TEXT };
	struct inspect_notes notes = { 0 };
	struct fs_info *fs;
	int ret = 0;

	argp_parse(&argp, argc, argv, 0, NULL, &a);
	fs = inspect_open(a.paths, a.npaths, -1, true, &notes);
	if (!fs)
		return 1;
	if (a.have_logical)
		ret = print_logical(fs, a.logical, a.format);
	else
		print_chunks(fs, a.format);
	fs_close(fs);
	return inspect_status(ret != 0, &notes);
}
