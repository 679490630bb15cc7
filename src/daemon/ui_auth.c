#include "daemon/ui_auth.h"
