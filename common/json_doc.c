// SPDX-License-Identifier: GPL-2.0-only
/* The one JSON document of a run; see json_doc.h. */
#include <stdio.h>

#include "common/json_doc.h"
#include "common/messages.h"

struct json_object *json_doc_new(void)
{
	struct json_object *doc = json_object_new_object();

	if (!doc)
		return NULL;
	json_object_object_add(doc, "version", json_object_new_int(JSON_DOC_VERSION));
	json_object_object_add(doc, "program", json_object_new_string(msg_program()));
	json_object_object_add(doc, "btk_version", json_object_new_string(BTK_VERSION));
	return doc;
}

/* Whether this run has printed its document (json_exit.c asks at exit). */
static bool doc_printed;

bool json_doc_was_printed(void)
{
	return doc_printed;
}

void json_doc_print(struct json_object *doc)
{
	if (!doc)
		return;
	doc_printed = true;
	fflush(stdout);
	puts(json_object_to_json_string_ext(doc, JSON_C_TO_STRING_PLAIN | JSON_C_TO_STRING_NOSLASHESCAPE));
	fflush(stdout);
	json_object_put(doc);
}
