#include "grammar/stack_arena.h"
