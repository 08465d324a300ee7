#include "grammar/matcher.h"
