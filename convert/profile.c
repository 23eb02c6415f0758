// SPDX-License-Identifier: GPL-2.0-only
/* btk-convert profile: change metadata/system profiles in place. */
#include <argp.h>
#include <errno.h>
#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "common/cli.h"
#include "common/env_knobs.h"
#include "common/messages.h"
#include "common/sizes.h"
#include "convert/convert.h"
#include <btk/blockgroups.h>
#include <btk/names.h>
#include <btk/trans.h>
#include <btk/volumes.h>

struct profile_args {
	struct profile_targets tg;
	bool dry_run, yes, no_verify;
	const char *undo_file;
	char **paths;
	unsigned npaths;
};

enum { OPT_METADATA = 'm', OPT_SYSTEM = 's', OPT_DATA = 'd', OPT_DRY_RUN = 'n', OPT_YES = 'y',
       OPT_UNDO = 256, OPT_NO_VERIFY };

static const struct argp_option profile_options[] = {
	{ "metadata", OPT_METADATA, "PROFILE", 0, "New metadata profile: single, dup, raid1, raid1c3, raid1c4", 0 },
	{ "system", OPT_SYSTEM, "PROFILE", 0, "New system profile (defaults to the metadata one)", 0 },
	{ "data", OPT_DATA, "PROFILE", 0, "New data profile: single, dup, raid1, raid1c3, raid1c4", 0 },
	{ "dry-run", OPT_DRY_RUN, NULL, 0, "Print what would change, per chunk, and write nothing", 0 },
	{ "yes", OPT_YES, NULL, 0, "Do not ask before removing copies", 0 },
	{ "no-verify", OPT_NO_VERIFY, NULL, 0, "Skip reading and verifying the copies that stay (unsafe)", 0 },
	{ "undo-file", OPT_UNDO, "FILE", 0, "Save what is overwritten to FILE, for btk-undo", 0 },
	{ 0 }
};

static error_t profile_parse_opt(int key, char *arg, struct argp_state *state)
{
	struct profile_args *a = state->input;
	char msg[300];
	uint64_t p;

	switch (key) {
	case OPT_METADATA:
	case OPT_SYSTEM:
	case OPT_DATA:
		if (profile_parse(arg, &p, msg, sizeof(msg)))
			argp_error(state, "%s", msg);
		if (key == OPT_METADATA) {
			a->tg.have_meta = true;
			a->tg.meta = p;
		} else if (key == OPT_SYSTEM) {
			a->tg.have_sys = true;
			a->tg.sys = p;
		} else {
			a->tg.have_data = true;
			a->tg.data = p;
		}
		break;
	case OPT_DRY_RUN: a->dry_run = true; break;
	case OPT_YES: a->yes = true; break;
	case OPT_NO_VERIFY: a->no_verify = true; break;
	case OPT_UNDO: a->undo_file = arg; break;
	case ARGP_KEY_END:
		if (!a->tg.have_meta && !a->tg.have_sys && !a->tg.have_data)
			argp_error(state, "give at least one of --metadata, --system, --data");
		if (a->tg.have_meta && !a->tg.have_sys) {
			a->tg.have_sys = true;
			a->tg.sys = a->tg.meta;
		}
		break;
	default: return cli_argp_devices(key, state, &a->paths, &a->npaths);
	}
	return 0;
}

/* Bytes in use in the chunk at logical (its block group item), 0 if unknown. */
static uint64_t chunk_used(const struct block_group_list *bgs, uint64_t logical)
{
	for (size_t i = 0; i < bgs->count; i++)
		if (bgs->groups[i].start == logical && !bgs->groups[i].missing)
			return bgs->groups[i].used;
	return 0;
}

/* Per chunk: the stripes kept, dropped and added, and the bytes the
 * verification reads (used bytes on each copy that stays) and the copying
 * writes (used bytes on each new copy). */
static void print_plan(struct fs_info *fs, const struct chunk_plan *plans, size_t n, bool verify)
{
	char flags[BG_FLAGS_STR_BUF], sz[SIZE_BUF_LEN], rd[SIZE_BUF_LEN], wr[SIZE_BUF_LEN];
	struct block_group_list bgs = { 0 };

	if (fs_read_block_groups(fs, &bgs))
		bgs.count = 0;
	for (size_t i = 0; i < n; i++) {
		const struct chunk_plan *p = &plans[i];
		uint64_t used = chunk_used(&bgs, p->logical);
		unsigned kept = 0, added = 0;
		for (unsigned k = 0; k < p->nnew; k++)
			p->added[k] ? added++ : kept++;
		block_group_flags_str(p->type & BTRFS_BLOCK_GROUP_TYPE_MASK, flags, sizeof(flags));
		printf("chunk %" PRIu64 " %s %s -> %s (%s per stripe)", p->logical, flags, profile_name(p->type),
		       profile_name(p->new_profile), size_format(p->stripe_size, sz, sizeof(sz), SIZE_HUMAN));
		printf(", reads %s, writes %s\n",
		       size_format(verify || added ? used * (kept ? kept : 1) : 0, rd, sizeof(rd), SIZE_HUMAN),
		       size_format(used * added, wr, sizeof(wr), SIZE_HUMAN));
		for (unsigned k = 0; k < p->nold; k++) {
			bool stays = false;
			for (unsigned j = 0; j < p->nnew; j++)
				stays |= !p->added[j] && p->new_stripes[j].devid == p->old_stripes[k].devid &&
					 p->new_stripes[j].physical == p->old_stripes[k].physical;
			printf("\t%s devid %" PRIu64 " physical %" PRIu64 "\n", stays ? "keep" : "drop",
			       p->old_stripes[k].devid, p->old_stripes[k].physical);
		}
		for (unsigned j = 0; j < p->nnew; j++)
			if (p->added[j])
				printf("\tadd  devid %" PRIu64 " physical %" PRIu64 "\n", p->new_stripes[j].devid,
				       p->new_stripes[j].physical);
	}
	block_group_list_free(&bgs);
}

/* Dropping copies loses redundancy: say so and ask (or require --yes). */
static bool confirm_drop(const struct chunk_plan *plans, size_t n, bool yes)
{
	bool drops = false;
	char answer[16];

	for (size_t i = 0; i < n; i++)
		drops |= profile_copies(plans[i].new_profile) < profile_copies(plans[i].type);
	if (!drops || yes)
		return true;
	msg_warning("this removes copies: a block damaged on the copy that stays can no longer be "
		    "repaired from another copy");
	if (!isatty(STDIN_FILENO)) {
		msg_error("refusing without --yes (no terminal to ask)");
		return false;
	}
	fprintf(stderr, "Remove the copies? [y/N] ");
	if (!fgets(answer, sizeof(answer), stdin))
		return false;
	return answer[0] == 'y' || answer[0] == 'Y';
}

/* The transaction: every chunk's new stripe set; writes during the commit
 * go to the union of old and new stripes. */
static int commit_plans_trans(struct fs_info *fs, const struct chunk_plan *plans, size_t n)
{
	struct trans *t;
	int ret = trans_start(fs, &t);

	if (ret)
		return ret;
	for (size_t i = 0; i < n && !ret; i++)
		ret = chunk_set_stripes(t, plans[i].logical, plans[i].new_profile, plans[i].new_stripes,
					plans[i].nnew);
	for (size_t i = 0; i < n && !ret; i++) {
		struct chunk_stripe u[16];
		unsigned nu = 0;
		for (unsigned k = 0; k < plans[i].nold; k++)
			u[nu++] = (struct chunk_stripe){ plans[i].old_stripes[k].devid, plans[i].old_stripes[k].physical, NULL };
		for (unsigned k = 0; k < plans[i].nnew; k++)
			if (plans[i].added[k])
				u[nu++] = (struct chunk_stripe){ plans[i].new_stripes[k].devid,
								 plans[i].new_stripes[k].physical, NULL };
		ret = chunk_map_set_stripes(fs, plans[i].logical, u, nu);
	}
	if (ret) {
		trans_abort(t);
		volumes_reload(fs);
		return ret;
	}
	ret = trans_commit(t);
	{
		int r2 = volumes_reload(fs);
		if (!ret)
			ret = r2;
	}
	return ret;
}

/* The conversion's transaction. A chunk it allocates must take the target
 * profile of its kind, and stay off the device space of the new copies,
 * whose dev extents go in chunk by chunk (any insert may need a new chunk). */
static int commit_plans(struct fs_info *fs, const struct profile_targets *tg, const struct chunk_plan *plans,
			size_t n)
{
	struct chunk_alloc_hints hints = { tg->have_meta ? (int64_t)tg->meta : -1,
					   tg->have_sys ? (int64_t)tg->sys : -1, NULL, NULL, 0 };
	struct stripe_place *place;
	uint64_t *len;
	size_t cap = 1;
	int ret = -ENOMEM;

	for (size_t i = 0; i < n; i++)
		cap += plans[i].nnew;
	place = malloc(cap * sizeof(*place));
	len = malloc(cap * sizeof(*len));
	if (place && len) {
		for (size_t i = 0; i < n; i++)
			for (unsigned k = 0; k < plans[i].nnew; k++)
				if (plans[i].added[k]) {
					place[hints.nreserved] = plans[i].new_stripes[k];
					len[hints.nreserved++] = plans[i].stripe_size;
				}
		hints.reserved = place;
		hints.reserved_len = len;
		fs_set_alloc_hints(fs, &hints);
		ret = commit_plans_trans(fs, plans, n);
		fs_set_alloc_hints(fs, NULL);
	}
	free(place);
	free(len);
	return ret;
}

int cmd_profile(int argc, char **argv)
{
	static const struct argp argp = { profile_options, profile_parse_opt, "DEVICE...",
		"Change the profile of metadata, system and data chunks in place, within single, dup, raid1, "
		"raid1c3 and raid1c4: no block moves, so this takes seconds where a balance takes hours. "
		"Dropping copies first verifies every block on the copies that stay (tree blocks by their "
		"checksum, data by the csum tree) and repairs it from another copy if needed; adding copies "
		"first copies every block to new device space. Data without checksums (nodatasum files, "
		"preallocated extents) can only be read, not verified: it is counted and reported.",
		NULL, NULL, NULL };
	struct profile_args a = { 0 };
	struct fs_open_options fo;
	struct chunk_plan *plans = NULL;
	struct verify_stats st;
	struct fs_info *fs;
	char msg[600] = "";
	size_t nplans = 0;
	int ret;

	argp_parse(&argp, argc, argv, 0, NULL, &a);
	fs_open_options_init(&fo);
	fo.writable = !a.dry_run;
	fo.undo_path = a.dry_run ? NULL : a.undo_file;
	fo.allow_missing = false;
	fo.note = msg_fs_note;
	fo.cancelled = cli_cancelled;
	env_knobs_fill(&fo);
	ret = fs_open((const char *const *)a.paths, a.npaths, &fo, &fs, msg, sizeof(msg));
	if (ret) {
		msg_error("%s", msg);
		return 1;
	}
	ret = profile_plan(fs, &a.tg, &plans, &nplans, msg, sizeof(msg));
	if (ret) {
		msg_error("%s", msg);
		goto out;
	}
	if (nplans == 0) {
		msg_info("nothing to convert: the chunks already have the requested profiles");
		goto out;
	}
	/* before hours of verifying and copying, not at the commit */
	if ((ret = trans_check_state(fs))) {
		msg_error("%s", fs_error_message(fs));
		goto out;
	}
	print_plan(fs, plans, nplans, !a.no_verify);
	if (a.dry_run)
		goto out;
	if (!confirm_drop(plans, nplans, a.yes)) {
		ret = -ECANCELED;
		goto out;
	}
	if (a.no_verify)
		msg_warning("--no-verify: the copies that stay are not checked; a bad block there becomes "
			    "unrecoverable");
	ret = profile_verify_and_copy(fs, plans, nplans, !a.no_verify, &st, msg, sizeof(msg));
	if (ret) {
		msg_error("%s", msg);
		goto out;
	}
	msg_info("verified %" PRIu64 " tree blocks (%.1f MiB read in %.2fs, %.1f MiB/s), repaired %" PRIu64
		 ", wrote %.1f MiB of new copies", st.blocks, (double)st.bytes_read / 1048576.0, st.seconds,
		 st.seconds > 0 ? (double)st.bytes_read / 1048576.0 / st.seconds : 0.0, st.repaired,
		 (double)st.bytes_written / 1048576.0);
	if (st.data_bytes)
		msg_info("verified %.1f MiB of data, %.1f MiB of it without checksums (nodatasum or "
			 "preallocated: read but not verifiable), repaired %" PRIu64 " data sector(s)",
			 (double)st.data_bytes / 1048576.0, (double)st.data_unverified / 1048576.0, st.data_repaired);
	ret = commit_plans(fs, &a.tg, plans, nplans);
	if (ret == -ECANCELED) {
		msg_error("cancelled before the commit: the filesystem is unchanged");
		goto out;
	} else if (ret) {
		msg_error("conversion failed, the filesystem is unchanged: %s", fs_error_message(fs)[0] ? fs_error_message(fs) : strerror(-ret));
		goto out;
	}
	msg_info("converted %zu chunk(s)", nplans);
	if (a.undo_file) {
		ret = fs_finish_undo(fs);
		if (ret)
			msg_error("the conversion is done, but finishing the undo file %s failed: %s", a.undo_file,
				  fs_error_message(fs)[0] ? fs_error_message(fs) : strerror(-ret));
		else
			msg_info("undo file %s written: 'btk-undo %s DEVICE...' rolls the conversion back",
				 a.undo_file, a.undo_file);
	}
out:
	free(plans);
	fs_close(fs);
	return ret ? 1 : 0;
}
