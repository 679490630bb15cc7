#include "daemon/ui_history.h"
