/* SPDX-License-Identifier: GPL-2.0-only */
/* The one JSON document a program prints with --format json: every run of
 * every btk program prints exactly one, an object that starts with
 *   "version": JSON_DOC_VERSION (the schema: bumped when a field changes
 *   meaning or goes away; new fields do not bump it),
 *   "program": "btk-check", "btk_version": "0.1.0"
 * and holds the command's own fields after them. */
#ifndef BTK_COMMON_JSON_DOC_H
#define BTK_COMMON_JSON_DOC_H

#include <stdbool.h>

#include <json-c/json.h>

#define JSON_DOC_VERSION 1

/* A new document with the three leading fields (NULL when out of memory). */
struct json_object *json_doc_new(void);
/* Print doc on stdout as one line and drop the reference to it. */
void json_doc_print(struct json_object *doc);
/* Whether json_doc_print has printed this run's document. */
bool json_doc_was_printed(void);

#endif
