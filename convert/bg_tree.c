/* btk-convert bg-tree: not implemented yet; says so instead of pretending. */
#include "common/messages.h"
#include "convert/convert.h"

int cmd_bg_tree(int argc, char **argv)
{
	(void)argc;
	(void)argv;
	msg_error("bg-tree conversion is not implemented yet; nothing was changed");
	return 1;
}
