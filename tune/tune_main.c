// SPDX-License-Identifier: GPL-2.0-only
/* btk-tune: change the label, the seeding flag, feature flags, the fsid or
 * the metadata_uuid of an unmounted btrfs filesystem; build the free-space
 * tree; rebuild the uuid tree. Option parsing and the order of operations. */
#include <argp.h>
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <uuid/uuid.h>

#include "common/cli.h"
#include "common/env_knobs.h"
#include "common/json_exit.h"
#include "common/messages.h"
#include <btk/super.h>
#include <btk/volumes.h>
#include "tune/tune.h"

struct tune_args {
	struct tune_opts o;
	struct cli_common_options common;
	char **paths;
	unsigned npaths;
};

enum {
	OPT_LABEL = 'L',
	OPT_SEEDING = 'S',
	OPT_ENABLE = 'O',
	OPT_METADATA_UUID = 'M',
	OPT_FSID = 'U',
	OPT_DRY_RUN = 'n',
	OPT_REBUILD_UUID_TREE = 256,
	OPT_UNDO_FILE,
};

static const struct argp_option tune_options[] = {
	{ NULL, 0, NULL, 0, "Label, flags and features (one transaction):", 1 },
	{ "label", OPT_LABEL, "TEXT", 0, "Set the label (at most 255 bytes; \"\" clears it)", 1 },
	{ "seeding", OPT_SEEDING, "on|off", 0,
	  "Set or clear the seeding flag (a seed filesystem mounts read-only; new devices can be "
	  "added to sprout a writable filesystem from it)", 1 },
	{ "enable", OPT_ENABLE, "FEATURE", 0,
	  "Turn on a feature; may be repeated. extref, skinny-metadata, no-holes: set the incompat "
	  "bit that lets the kernel write such items from now on (existing items stay as they are; "
	  "older kernels can no longer mount the filesystem). free-space-tree: build the free-space "
	  "tree from the extent tree, drop the v1 space cache and set the FREE_SPACE_TREE and "
	  "FREE_SPACE_TREE_VALID compat_ro bits", 1 },
	{ NULL, 0, NULL, 0, "Identity:", 2 },
	{ "metadata-uuid", OPT_METADATA_UUID, "UUID", OPTION_ARG_OPTIONAL,
	  "Change the fsid that mount and blkid see to UUID (random without '=UUID') without "
	  "rewriting metadata: the METADATA_UUID incompat bit is set and tree blocks keep the "
	  "original fsid, which the superblock's metadata_uuid records. Setting it back to that "
	  "original fsid clears the bit. Two commits; an interrupted run is finished by running "
	  "it again", 2 },
	{ "fsid", OPT_FSID, "UUID", OPTION_ARG_OPTIONAL,
	  "Rewrite the fsid (random without '=UUID') in every tree block (every copy), in the "
	  "device items and in every superblock. Not with METADATA_UUID set. Until it finishes the "
	  "filesystem does not mount; an interrupted run is finished by running --fsid again", 2 },
	{ NULL, 0, NULL, 0, "Trees:", 3 },
	{ "rebuild-uuid-tree", OPT_REBUILD_UUID_TREE, NULL, 0,
	  "Delete the uuid tree and build it again from the subvolumes' root items (uuid and "
	  "received uuid)", 3 },
	{ NULL, 0, NULL, 0, "How:", 4 },
	{ "dry-run", OPT_DRY_RUN, NULL, 0,
	  "Show what would change; open the devices read-only and write nothing", 4 },
	{ "undo-file", OPT_UNDO_FILE, "FILE", 0,
	  "Save the old contents of everything overwritten in FILE (must not exist), for btk-undo", 4 },
	{ 0 }
};

static const struct {
	const char *name;
	uint64_t incompat;
} incompat_features[] = {
	{ "extref", BTRFS_FEATURE_INCOMPAT_EXTENDED_IREF },
	{ "skinny-metadata", BTRFS_FEATURE_INCOMPAT_SKINNY_METADATA },
	{ "no-holes", BTRFS_FEATURE_INCOMPAT_NO_HOLES },
};

static void parse_uuid_arg(struct argp_state *state, const char *opt, const char *arg, uint8_t *out)
{
	uuid_t u;

	if (uuid_parse(arg, u) != 0)
		argp_error(state, "invalid %s '%s' (expected a UUID like 01234567-89ab-cdef-0123-456789abcdef)",
			   opt, arg);
	if (tune_uuid_is_zero(u))
		argp_error(state, "%s cannot be the nil UUID", opt);
	memcpy(out, u, 16);
}

static error_t tune_parse(int key, char *arg, struct argp_state *state)
{
	struct tune_args *a = state->input;
	size_t i;

	switch (key) {
	case ARGP_KEY_INIT:
		state->child_inputs[0] = &a->common;
		break;
	case OPT_LABEL:
		if (strlen(arg) >= BTRFS_LABEL_SIZE)
			argp_error(state, "label too long: %zu bytes (at most %d)", strlen(arg), BTRFS_LABEL_SIZE - 1);
		a->o.label = arg;
		break;
	case OPT_SEEDING:
		if (!strcmp(arg, "on") || !strcmp(arg, "1"))
			a->o.seeding = 1;
		else if (!strcmp(arg, "off") || !strcmp(arg, "0"))
			a->o.seeding = 0;
		else
			argp_error(state, "invalid --seeding '%s' (expected on or off)", arg);
		break;
	case OPT_ENABLE:
		if (!strcmp(arg, "free-space-tree") || !strcmp(arg, "fst")) {
			a->o.enable_fst = true;
			break;
		}
		for (i = 0; i < sizeof(incompat_features) / sizeof(incompat_features[0]); i++)
			if (!strcmp(arg, incompat_features[i].name))
				break;
		if (i == sizeof(incompat_features) / sizeof(incompat_features[0]))
			argp_error(state, "unknown feature '%s' (expected extref, skinny-metadata, no-holes or "
				   "free-space-tree)", arg);
		a->o.enable_incompat |= incompat_features[i].incompat;
		break;
	case OPT_METADATA_UUID:
		a->o.metadata_uuid = true;
		if (arg && arg[0] == '=')
			arg++; /* -M=UUID, as the man page writes the short form too */
		if (arg) {
			parse_uuid_arg(state, "--metadata-uuid", arg, a->o.metadata_uuid_value);
			a->o.metadata_uuid_given = true;
		}
		break;
	case OPT_FSID:
		a->o.fsid = true;
		if (arg && arg[0] == '=')
			arg++; /* -U=UUID */
		if (arg) {
			parse_uuid_arg(state, "--fsid", arg, a->o.fsid_value);
			a->o.fsid_given = true;
		}
		break;
	case OPT_REBUILD_UUID_TREE: a->o.rebuild_uuid_tree = true; break;
	case OPT_DRY_RUN: a->o.dry_run = true; break;
	case OPT_UNDO_FILE: a->o.undo_path = arg; break;
	case ARGP_KEY_END:
		if (!a->o.label && a->o.seeding < 0 && !a->o.enable_incompat && !a->o.enable_fst &&
		    !a->o.metadata_uuid && !a->o.fsid && !a->o.rebuild_uuid_tree)
			argp_error(state, "nothing to do: give at least one change");
		if (a->o.fsid && a->o.metadata_uuid)
			argp_error(state, "--fsid and --metadata-uuid exclude each other");
		if (a->o.seeding == 1 && (a->o.fsid || a->o.metadata_uuid))
			argp_error(state, "--seeding on excludes --fsid and --metadata-uuid: a seed's fsid "
				   "must not change");
		if (a->o.dry_run && a->o.undo_path)
			argp_error(state, "--dry-run writes nothing: --undo-file makes no sense with it");
		break;
	default: return cli_argp_devices(key, state, &a->paths, &a->npaths);
	}
	return 0;
}

static const char *const doc =
	"Change the label, the seeding flag, feature flags, the fsid or the metadata_uuid of an "
	"unmounted btrfs filesystem; build its free-space tree; rebuild its uuid tree. Give every "
	"device of a multi-device filesystem (others are found by fsid when possible). Mounted "
	"devices are refused. Exit status: 0 done (or nothing to change), 1 error or usage error."
	"\vAll changes but --fsid and --metadata-uuid are made in one copy-on-write transaction: a "
	"crash leaves the old filesystem or the new one. See btk-tune(8).";

/* Everything made in the first transaction: superblock fields and trees. */
static bool wants_transaction(const struct tune_opts *o)
{
	return o->label || o->seeding >= 0 || o->enable_incompat || o->enable_fst || o->rebuild_uuid_tree;
}

static int run_transaction(struct fs_info *fs, const struct tune_opts *o)
{
	struct trans *t;
	bool changed = false;
	int ret;

	ret = trans_start(fs, &t);
	if (ret) {
		msg_errno(ret, "cannot start a transaction: %s", btk_error_msg());
		return ret;
	}
	tune_apply_super_changes(fs, o, trans_super(t), &changed);
	if (o->rebuild_uuid_tree) {
		ret = tune_rebuild_uuid_tree(fs, t);
		if (ret)
			goto fail;
		changed = true;
	}
	if (o->enable_fst) {
		if ((fs->compat_ro & BTRFS_FEATURE_COMPAT_RO_FREE_SPACE_TREE_VALID) &&
		    (fs->compat_ro & BTRFS_FEATURE_COMPAT_RO_FREE_SPACE_TREE) && fs->free_space_root.bytenr) {
			printf("free-space-tree: already enabled\n");
		} else {
			ret = tune_build_free_space_tree(fs, t);
			if (ret)
				goto fail;
			changed = true;
		}
	}
	if (!changed) {
		trans_abort(t);
		return 0;
	}
	if (o->dry_run) {
		trans_abort(t);
		return 0;
	}
	ret = trans_commit(t);
	if (ret)
		msg_errno(ret, "commit failed, the filesystem is unchanged: %s", btk_error_msg());
	return ret;
fail:
	msg_errno(ret, "%s", btk_error_msg()[0] ? btk_error_msg() : "failed");
	trans_abort(t);
	return ret;
}

static struct fs_info *open_filesystem(const struct tune_args *a)
{
	struct fs_open_options opts;
	struct fs_info *fs;
	int ret;

	fs_open_options_init(&opts);
	opts.note = msg_fs_note;
	opts.cancelled = cli_cancelled;
	/* a dry run reads only: whatever it does in memory cannot reach the devices */
	opts.writable = !a->o.dry_run;
	opts.allow_missing = a->o.dry_run;
	opts.undo_path = a->o.undo_path;
	/* open a half-changed filesystem too: the pending check explains what to do */
	opts.fsid_change = true;
	env_knobs_fill(&opts);
	ret = fs_open((const char *const *)a->paths, a->npaths, &opts, &fs);
	if (ret) {
		msg_error("%s", btk_error_msg());
		return NULL;
	}
	if (a->o.dry_run)
		fs->writable = true; /* transactions run in memory and are aborted */
	return fs;
}

int main(int argc, char **argv)
{
	static const struct argp_child children[] = { { &cli_common_argp, 0, NULL, 0 }, { 0 } };
	static const struct argp argp = { tune_options, tune_parse, "DEVICE...", doc, children, NULL, NULL };
	struct tune_args a = { .o = { .seeding = -1 } };
	struct fs_info *fs;
	int pending, ret = 0;

	cli_init("btk-tune", 1);
	json_exit_guard(argc, argv);
	cli_enable_cancel(); /* SIGINT: no commit after it (fs_open_options.cancelled) */
	argp_parse(&argp, argc, argv, 0, NULL, &a);
	a.o.progress = cli_progress_mode(&a.common);

	fs = open_filesystem(&a);
	if (!fs)
		return 1;
	pending = tune_fsid_change_pending(fs);
	if (pending < 0) {
		msg_errno(pending, "reading the superblocks: %s", btk_error_msg());
		fs_close(fs);
		return 1;
	}
	if ((pending == 1 && !a.o.fsid) || (pending == 2 && !a.o.metadata_uuid)) {
		msg_error("an interrupted %s change is pending: run 'btk-tune %s DEVICE...' to finish it first",
			  pending == 1 ? "fsid" : "metadata_uuid", pending == 1 ? "--fsid" : "--metadata-uuid");
		fs_close(fs);
		return 1;
	}
	ret = tune_check_super_changes(fs, &a.o);
	/* refused before anything is said about what would change */
	if (!ret && (wants_transaction(&a.o) || a.o.metadata_uuid || a.o.fsid) && (ret = trans_check_state(fs)))
		msg_error("%s", btk_error_msg());
	if (!ret && wants_transaction(&a.o))
		ret = run_transaction(fs, &a.o);
	if (!ret && a.o.metadata_uuid)
		ret = tune_metadata_uuid(fs, &a.o);
	if (!ret && a.o.fsid)
		ret = tune_fsid(fs, &a.o);
	if (!ret && !a.o.dry_run) {
		ret = fs_finish_undo(fs);
		if (ret)
			msg_errno(ret, "%s", btk_error_msg());
	}
	if (!ret && a.o.dry_run)
		msg_info("dry run: nothing was written");
	fs_close(fs);
	return ret ? 1 : 0;
}
