#include "grammar/token_index.h"
