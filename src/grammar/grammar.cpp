#include "grammar/grammar.h"
