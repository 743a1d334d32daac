#include <uv.h>
#include <sys/eventfd.h>
#include <sys/file.h>
