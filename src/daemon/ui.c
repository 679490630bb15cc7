#include "daemon/ui.h"
