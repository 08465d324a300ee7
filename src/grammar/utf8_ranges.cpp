#include "grammar/utf8_ranges.h"
